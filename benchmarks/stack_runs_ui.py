"""Event-loop stalls during a stack run of the Text, Automatic and Propagate tabs (the toy model).

A ``--slices`` x ``--size`` x ``--size`` synthetic nuclei stack in a real napari window with the
dock, the shipped toy loaded; each tab runs the whole stack twice, side by side in one process:
``per-slice`` applies every result as it arrives (a ``Pacer`` that flushes on every push, what the
tabs did before they were paced) and ``paced`` as shipped (one batch per
:data:`~napari_sam3_onnx._napari.pacing.INTERVAL_MS`). A 10 ms QTimer
(:class:`benchmarks.gui_probes.Ticker`) records the largest gap between its ticks during the run:
how long the window could not repaint or take a click; "after click" leaves out the Run
button's own handler (where napari adds the run's layer), and "idle gap" is the same timer over
an idle event loop as long as the run, right after it (the machine's own noise). ``--sample``
prints where the Qt thread was during gaps over 50 ms (:mod:`benchmarks.stall_sampler`).

Run under a display (``xvfb-run -a python -m benchmarks.stack_runs_ui``); the Automatic tab uses
a 4 x 4 click grid (``--points``) so that a toy slice is as quick as a Text slice.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _stack(slices: int, size: int) -> np.ndarray:
    from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

    image, _ = synthetic_nuclei((slices, size, size + size // 3), n_nuclei=6)
    return image


def _start(tab: str, viewer, widget, points: int):
    """Prepare ``tab`` and return (panel, start callable)."""
    panel = widget.panels[tab]
    widget.tabs.setCurrentWidget(panel)
    if tab == "Text":
        panel.concepts.setText("nucleus")
        panel.scope.set_mode("all")
        return panel, panel.run
    if tab == "Automatic":
        panel.settings.points_per_side.setValue(points)
        panel.scope.set_mode("all")
        return panel, panel.run
    return panel, lambda: _propagate(viewer, widget, panel)


def _propagate(viewer, widget, panel) -> None:
    image = viewer.layers["nuclei"]
    z = image.data.shape[0] // 2
    viewer.dims.set_current_step(0, z)
    plane = np.asarray(image.data[z], np.float32)
    r, c = np.unravel_index(int(np.argmax(plane)), plane.shape)
    widget.session.layers.points.add([z, r, c])
    _wait(lambda: not widget.session.pending)
    ids = widget.commit()
    _wait(lambda: not widget.session.pending)
    panel.stop_after.setValue(0)
    panel.from_ids.setChecked(True)
    panel.ids.setText(",".join(map(str, ids)))
    panel.run()


def _wait(cond, timeout: float = 600.0) -> None:
    from qtpy.QtWidgets import QApplication

    end = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > end:
            raise TimeoutError("run did not finish")
        QApplication.processEvents()
        time.sleep(0.002)


def _per_slice(monkey: bool):
    """Make every Pacer apply each result at once (``monkey``) or restore the shipped pacing."""
    from napari_sam3_onnx._napari import pacing

    if not hasattr(pacing.Pacer, "_shipped_push"):
        pacing.Pacer._shipped_push = pacing.Pacer.push

    def push_now(self, item) -> None:
        self._items.append(item)
        self.flush()

    pacing.Pacer.push = push_now if monkey else pacing.Pacer._shipped_push


def _reset(viewer) -> None:
    """Empty every Labels layer (the next run starts as the first did)."""
    from napari.layers import Labels

    for layer in viewer.layers:
        if isinstance(layer, Labels):
            layer.data = np.zeros_like(layer.data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=40)
    parser.add_argument("--size", type=int, default=384, help="rows (columns: 4/3 of it)")
    parser.add_argument("--points", type=int, default=4, help="Automatic tab grid side")
    parser.add_argument("--tabs", default="Text,Automatic,Propagate")
    parser.add_argument("--modes", default="per-slice,paced")
    parser.add_argument("--sample", action="store_true",
                        help="print the Qt thread's stacks seen during stalls > 50 ms")
    parser.add_argument("--switch-ms", type=float, default=None,
                        help="sys.setswitchinterval for the whole run (an experiment)")
    args = parser.parse_args(argv)
    if args.switch_ms is not None:
        import sys

        sys.setswitchinterval(args.switch_ms / 1e3)

    import napari

    from benchmarks.gui_probes import Ticker, idle_stall
    from benchmarks.stall_sampler import StallSampler
    from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET

    viewer = napari.Viewer(show=True)
    viewer.add_image(_stack(args.slices, args.size), name="nuclei")
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    widget.model.load_toy()
    _wait(lambda: widget.session.encoder is not None)
    print(f"{args.slices} x {args.size} x {args.size + args.size // 3} stack, toy model")
    print(f"{'tab':10} {'mode':10} {'run s':>7} {'max gap ms':>11} {'after click':>11} "
          f"{'ticks/s':>8} {'idle gap ms':>12}")
    try:
        for tab in args.tabs.split(","):
            for mode in args.modes.split(","):
                _per_slice(mode == "per-slice")
                panel, start = _start(tab, viewer, widget, args.points)
                ticker = Ticker()
                sampler = StallSampler() if args.sample else None
                ticker.start()
                if sampler is not None:
                    sampler.start()
                t0 = time.perf_counter()
                start()
                t1 = time.perf_counter()  # the Run click's handler returned (its layer added)
                _wait(lambda p=panel: not p.running)
                run = time.perf_counter() - t0
                ticker.stop()
                if sampler is not None:
                    sampler.stop()
                gap, rate = ticker.max_gap_ms, len(ticker.gaps) / run
                after = ticker.max_gap_within_ms(t1, t0 + run)
                idle = idle_stall(ticker, run)  # the same window, idle, as long
                print(f"{tab:10} {mode:10} {run:7.2f} {gap:11.0f} {after:11.0f} {rate:8.0f} "
                      f"{idle:12.0f}", flush=True)
                if sampler is not None:
                    sampler.report()
                _reset(viewer)
    finally:
        _per_slice(False)
        viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
