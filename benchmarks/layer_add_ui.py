"""What napari itself costs the event loop to add a Labels layer (no plugin, no dock).

A bare napari window showing a ``--slices`` x ``--size`` x ``4/3 --size`` image; ``--adds``
Labels layers of that shape (zeros, int32, as the tabs' run layers) added one after another,
each from an idle event loop. For each add: the ``add_labels`` call's own time (layer controls,
vispy visuals and overlays built synchronously by napari) and the 10 ms timer's largest gap over
the next 1.5 s (the call, then the new layer's first draw: its shaders built). This is the floor
under the first stack run of a tab, which adds its layer when Run is clicked
(``benchmarks/stack_runs_ui.py``): no plugin code runs here.

Run under a display: ``xvfb-run -a -s "-screen 0 1600x1000x24" python -m benchmarks.layer_add_ui``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=40)
    parser.add_argument("--size", type=int, default=512, help="rows (columns: 4/3 of it)")
    parser.add_argument("--adds", type=int, default=4)
    args = parser.parse_args(argv)

    import napari
    from qtpy.QtWidgets import QApplication

    from benchmarks.gui_probes import Ticker
    from benchmarks.stack_runs_ui import _run_loop

    shape = (args.slices, args.size, args.size + args.size // 3)
    viewer = napari.Viewer(show=True)
    rng = np.random.default_rng(0)
    viewer.add_image(rng.random(shape, dtype=np.float32), name="image")
    print(f"bare napari {napari.__version__}, image {shape}; per add: handler ms, max gap ms")
    try:
        for i in range(1, args.adds + 1):
            idle_until = time.perf_counter() + 0.5
            while time.perf_counter() < idle_until:
                QApplication.processEvents()
            ticker = Ticker()
            ticker.start()
            t0 = time.perf_counter()
            viewer.add_labels(np.zeros(shape, np.int32), name=f"labels {i}")
            handler = time.perf_counter() - t0
            _run_loop(lambda t=t0: time.perf_counter() > t + 1.5)
            ticker.stop()
            print(f"add {i}: handler {1e3 * handler:5.0f}  max gap {ticker.max_gap_ms:5.0f}  "
                  f"load {os.getloadavg()[0]:4.1f}", flush=True)
    finally:
        viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
