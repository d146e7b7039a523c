"""Event-loop stalls while encode ahead works: a 10 ms QTimer's largest gap, on and idle.

A real napari window with the dock and the toy tracker pair built at SAM 3's input size
(1008 px); a ``--slices`` x ``--size`` x 4/3 ``--size`` stack. ``idle``: the ticker runs for a
few seconds with nothing to do (the window's own stalls); ``step``: one step with encode
ahead off (napari slicing and drawing the new plane); ``ahead``: encode ahead is switched on
with ``--ahead`` planes and the user steps once, then the ticker runs until every plane ahead is
encoded. Run under a display: ``xvfb-run -a python -m benchmarks.encode_ahead_ui``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def _spin(cond, timeout: float = 600.0) -> None:
    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the run did not finish")
        QApplication.processEvents()
        time.sleep(0.002)


def main(argv: list[str] | None = None) -> int:
    """Print the largest gap (ms) and ticks per second, idle and while encoding ahead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=12)
    parser.add_argument("--size", type=int, default=600, help="rows (columns: 4/3 of it)")
    parser.add_argument("--ahead", type=int, default=6, help="planes encoded ahead")
    args = parser.parse_args(argv)

    import napari

    from benchmarks.gui_probes import Ticker
    from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
    from napari_sam3_onnx.testing.geometry import FULL
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    rng = np.random.default_rng(0)
    stack = rng.integers(0, 4000, (args.slices, args.size, args.size * 4 // 3), np.uint16)
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_hf_tracker(Path(tmp) / "toy", FULL)
        viewer = napari.Viewer(show=True)
        viewer.add_image(stack, name="stack")
        _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
        widget.load_bundle(folder, toy=True)
        _spin(lambda: widget.session.encoder is not None)
        print(f"{stack.shape} stack, toy tracker pair at 1008 px")
        print(f"{'mode':8} {'run s':>7} {'max gap ms':>11} {'ticks/s':>8} {'encoded':>8}")
        try:
            widget.prefetch.setChecked(False)  # on by default: off for the idle row
            viewer.dims.set_current_step(0, 0)
            t0 = time.perf_counter()
            _spin(lambda: time.perf_counter() - t0 > 3.0)  # the window settles (not measured)
            ticker = Ticker()
            ticker.start()
            t0 = time.perf_counter()
            _spin(lambda: time.perf_counter() - t0 > 3.0)
            ticker.stop()
            print(f"{'idle':8} {3.0:7.2f} {ticker.max_gap_ms:11.0f} "
                  f"{len(ticker.gaps) / 3.0:8.0f} {0:8}")
            ticker = Ticker()  # a step with encode ahead off: the viewer's own slicing
            ticker.start()
            t0 = time.perf_counter()
            viewer.dims.set_current_step(0, 2)
            _spin(lambda: time.perf_counter() - t0 > 1.5)
            ticker.stop()
            print(f"{'step':8} {1.5:7.2f} {ticker.max_gap_ms:11.0f} "
                  f"{len(ticker.gaps) / 1.5:8.0f} {0:8}")
            viewer.dims.set_current_step(0, 0)
            _spin(lambda: time.perf_counter() - t0 > 3.0)
            scheduler = widget.ahead.scheduler
            scheduler.ahead = args.ahead
            widget.workspace.cache.budget_bytes = 1 << 34  # room for every plane ahead
            widget.prefetch.setChecked(True)
            want = min(args.ahead + 1, args.slices - 1)
            ticker = Ticker()
            ticker.start()
            t0 = time.perf_counter()
            viewer.dims.set_current_step(0, 1)  # a step up from plane 0
            _spin(lambda: scheduler.encoded >= want and scheduler.wait_idle(0))
            run = time.perf_counter() - t0
            ticker.stop()
            print(f"{'ahead':8} {run:7.2f} {ticker.max_gap_ms:11.0f} "
                  f"{len(ticker.gaps) / run:8.0f} {scheduler.encoded:8}")
        finally:
            widget.prefetch.setChecked(False)
            viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
