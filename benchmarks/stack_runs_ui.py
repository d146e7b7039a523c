"""Event-loop stalls during a stack run of the Text, Automatic and Propagate tabs (the toy model).

A ``--slices`` x ``--size`` x ``4/3 --size`` synthetic nuclei stack (non-square planes) in a real
napari window with the dock, the shipped toy loaded. Each tab is prepared first (the Propagate
tab's seed: a click committed), then runs the whole stack ``--runs`` times; the first run of a
tab adds its layer, the next ones write into it. Each run is timed from its Run click to its end,
in a real Qt event loop: a 10 ms QTimer (:class:`benchmarks.gui_probes.Ticker`) records the gaps
between its ticks (p50 / p95 / max, and how many exceed 100 ms): how long the window could not
repaint or take a click; "after" leaves out the Run click's own handler. "qt cpu" is the Qt
thread's own CPU time over the run's wall time (``time.thread_time``: on a loaded machine a gap
can be long while the thread computed little), "apply" the batches of results the tab applied
(:class:`~napari_sam3_onnx._napari.pacing.Pacer`) with the longest one's wall and CPU ms,
"+layers" the layers added during the run, "idle" the same timer's max gap over an idle event
loop right after (the machine's own noise), "load" the 1-minute load average.

``--modes per-slice`` applies every result as it arrives (a ``Pacer`` that flushes on every
push, what the tabs did before they were paced). ``--sample`` prints where the Qt thread was
during gaps over 50 ms (:mod:`benchmarks.stall_sampler`). ``--label`` tags the rows, so runs of
two source trees (``PYTHONPATH=old/src`` and ``new/src``, alternated) can be read side by side.

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
    """Prepare ``tab`` and return (panel, start callable): the callable is the Run click."""
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
    _seed(viewer, widget, panel)  # the seed's click and commit: before the timed run
    return panel, panel.run


def _seed(viewer, widget, panel) -> None:
    """One click on the brightest pixel of the middle slice, committed: the run's seed id."""
    image = viewer.layers["nuclei"]
    z = image.data.shape[0] // 2
    viewer.dims.set_current_step(0, z)
    plane = np.asarray(image.data[z], np.float32)
    r, c = np.unravel_index(int(np.argmax(plane)), plane.shape)
    widget.session.layers.points.add([z, r, c])
    _wait(lambda: not widget.session.pending)
    ids = widget.commit()
    _wait(lambda: not widget.session.pending)
    widget.tabs.setCurrentWidget(panel)
    panel.stop_after.setValue(0)
    panel.from_ids.setChecked(True)
    panel.ids.setText(",".join(map(str, ids)))


def _run_loop(cond, timeout: float = 600.0) -> None:
    """Turn a real Qt event loop (as napari's) until ``cond()`` holds (polled every 5 ms)."""
    from qtpy.QtCore import QEventLoop, QTimer

    loop, poll = QEventLoop(), QTimer()
    end = time.perf_counter() + timeout

    def check() -> None:
        if cond() or time.perf_counter() > end:
            loop.quit()

    poll.setInterval(5)
    poll.timeout.connect(check)
    poll.start()
    loop.exec()
    poll.stop()
    if not cond():
        raise TimeoutError("run did not finish")


class ApplyClock:
    """Times every batch a tab's :class:`~napari_sam3_onnx._napari.pacing.Pacer` applies.

    Wall time and the Qt thread's own CPU time (``time.thread_time``: what the thread computed,
    not the time it waited for a CPU on a loaded machine) of each batch.
    """

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def watch(self, pacer) -> None:
        """Time ``pacer``'s batches from now on (once per pacer)."""
        if getattr(pacer, "_clocked", False):
            return
        inner = pacer._apply

        def apply(items) -> None:
            t, c = time.perf_counter(), time.thread_time()
            try:
                inner(items)
            finally:
                self.wall.append(time.perf_counter() - t)
                self.cpu.append(time.thread_time() - c)

        pacer._apply, pacer._clocked = apply, True

    def reset(self) -> None:
        self.wall, self.cpu = [], []


def _pacer(panel):
    """The tab's Pacer (the Propagate tab's is its runner's job's)."""
    runner = panel.runner
    return getattr(runner, "job", runner).pacer


def _ms(values, q: float) -> float:
    return 1e3 * float(np.percentile(values, q)) if len(values) else 0.0


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=40)
    parser.add_argument("--size", type=int, default=512, help="rows (columns: 4/3 of it)")
    parser.add_argument("--points", type=int, default=4, help="Automatic tab grid side")
    parser.add_argument("--tabs", default="Text,Automatic,Propagate")
    parser.add_argument("--modes", default="paced", help="paced and/or per-slice")
    parser.add_argument("--runs", type=int, default=2,
                        help="runs per tab and mode (the first adds the run's layer)")
    parser.add_argument("--label", default="", help="a tag printed on every row (old/new)")
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
    clock = ApplyClock()
    print(f"{args.slices} x {args.size} x {args.size + args.size // 3} stack, toy model "
          f"{args.label}".rstrip())
    print(f"{'':4}{'tab':10} {'mode':9} {'run':>3} {'run s':>6} {'gap p50':>7} {'p95':>5} "
          f"{'max':>5} {'>100':>4} {'after':>5} {'qt cpu':>6} {'apply n':>7} {'max ms':>6} "
          f"{'cpu ms':>6} {'+layers':>7} {'idle':>5} {'load':>5}")
    try:
        for tab in args.tabs.split(","):
            panel, start = _start(tab, viewer, widget, args.points)
            for mode in args.modes.split(","):
                _per_slice(mode == "per-slice")
                for run_no in range(1, args.runs + 1):
                    _row(args, tab, mode, run_no, viewer, panel, start, clock, Ticker,
                         StallSampler, idle_stall)
    finally:
        _per_slice(False)
        viewer.close()
    return 0


def _row(args, tab, mode, run_no, viewer, panel, start, clock, ticker_cls, sampler_cls,
         idle_stall) -> None:
    """One timed run of ``tab``: the Run click to the run's end, and its table row."""
    import os

    added: list[str] = []
    on_insert = viewer.layers.events.inserted.connect(lambda e: added.append(e.value.name))
    ticker = ticker_cls()
    sampler = sampler_cls() if args.sample else None
    clock.reset()
    clock.watch(_pacer(panel))
    _wait(lambda: True)  # the events queued by the set-up first
    ticker.start()
    if sampler is not None:
        sampler.start()
    t0, c0 = time.perf_counter(), time.thread_time()
    start()
    t1 = time.perf_counter()  # the Run click's handler returned (its layer added)
    _run_loop(lambda p=panel: not p.running)
    run = time.perf_counter() - t0
    qt_cpu = (time.thread_time() - c0) / run  # share of the run the Qt thread computed
    ticker.stop()
    if sampler is not None:
        sampler.stop()
    viewer.layers.events.inserted.disconnect(on_insert)
    gaps = np.asarray(ticker.gaps)
    after = ticker.max_gap_within_ms(t1, t0 + run)
    idle = idle_stall(ticker, min(run, 5.0))  # the same window, idle (the machine's noise)
    load = os.getloadavg()[0]
    print(f"{args.label:4}{tab:10} {mode:9} {run_no:3d} {run:6.2f} {_ms(gaps, 50):7.0f} "
          f"{_ms(gaps, 95):5.0f} {_ms(gaps, 100):5.0f} {int((gaps > 0.1).sum()):4d} "
          f"{after:5.0f} {100 * qt_cpu:5.0f}% {len(clock.wall):7d} {_ms(clock.wall, 100):6.0f} "
          f"{_ms(clock.cpu, 100):6.0f} {len(added):7d} {idle:5.0f} {load:5.1f}", flush=True)
    if sampler is not None:
        sampler.report()
    if run_no < args.runs:
        _reset(viewer, keep_target=tab == "Propagate")


def _reset(viewer, keep_target: bool = False) -> None:
    """Empty the run's Labels layers in place (the next run starts as the first did).

    ``keep_target``: a propagation's target keeps its seed slice (the next run's seed).
    """
    from napari.layers import Labels

    for layer in viewer.layers:
        if isinstance(layer, Labels):
            if keep_target and layer.data.ndim == 3 and layer.data.any():
                z = layer.data.shape[0] // 2
                seed = np.array(layer.data[z])
                layer.data[:] = 0
                layer.data[z] = seed
            else:
                layer.data[:] = 0
            layer.refresh()


if __name__ == "__main__":
    raise SystemExit(main())
