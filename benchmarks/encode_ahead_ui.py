"""Event-loop stalls while encode ahead works: a 10 ms QTimer's gaps, on and idle.

A real napari window with the dock and the toy tracker pair built at SAM 3's input size
(1008 px); a ``--slices`` x ``--size`` x 4/3 ``--size`` stack. Each encode first runs a chain of
matrix products in onnxruntime for ``--encode-s`` seconds (stoppable, on every core, the GIL
released: a SAM 3 encode's shape on a CPU), then the toy encoder with its real pre- and
post-processing. Rows:

``idle``: the ticker runs with nothing to do (the window's own stalls); ``step``: one step with
encode ahead off (napari slicing and drawing the new plane); ``ahead``: encode ahead is switched
on and the user steps once; the ticker runs from ``--settle`` seconds after the step (the step's
own stall is the ``step`` row) until ``--ahead`` planes are encoded. With ``--compare`` the
``ahead`` row is measured two ways in one run, in turn, ``--repeats`` times: the status
line's fix undone (``before``, see :func:`_undo_fixes`) and as shipped (``after``). Each row
gives the gap distribution (median, 95th and 99th percentile, largest, gaps over 50 and
100 ms). ``--sample`` prints where the Qt thread was during gaps over 50 ms
(:mod:`benchmarks.stall_sampler`). Run under a display:
``xvfb-run -a python -m benchmarks.encode_ahead_ui --compare``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def _spin(cond, timeout: float = 900.0) -> None:
    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the run did not finish")
        QApplication.processEvents()
        time.sleep(0.002)


def _wait(seconds: float) -> None:
    t0 = time.perf_counter()
    _spin(lambda: time.perf_counter() - t0 > seconds)


def _chain_graph(path: Path, links: int = 60, side: int = 512) -> Path:
    """``y = x @ w @ ... @ w``: many onnxruntime operators (``RunOptions.terminate`` stops it)."""
    from napari_sam3_onnx.testing.slow_graph import build_slow_graph

    return build_slow_graph(path, links=links, side=side, gain=1.0)


def _lengthen_encodes(adapter, graph: Path, seconds: float) -> None:
    """Every encode of ``adapter`` first runs ``graph`` for ``seconds`` (stoppable)."""
    from napari_sam3_onnx.models.runtime import LazySession

    session = LazySession(graph)
    feed = {"x": np.ones((512, 512), np.float32)}

    def lengthened(real):
        def encode(rgb, *args):
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                session.run(["y"], feed)
            return real(rgb, *args)
        return encode

    adapter.encode = lengthened(adapter.encode)
    adapter.encode_for = lengthened(adapter.encode_for)


def _undo_fixes(widget, undo: bool) -> None:
    """Put the dock's encode-ahead status line back as it was before its fix (``undo``), or not.

    Before: the line was hidden whenever the scheduler had nothing to say (between two
    planes, too) and shown again, and its width followed its text; each change laid the dock
    out again, which resized and redrew the viewer's canvas.
    """
    from qtpy.QtWidgets import QSizePolicy

    from napari_sam3_onnx._napari.clicks.ahead import index_label

    control = widget.ahead

    def old_refresh() -> None:  # the status poll's slot before the fix, verbatim
        state = control.scheduler.state
        text = ""
        if state.text:
            text = f"Encode ahead: {state.text}"
            image = control._image
            if state.ref is not None and image is not None and state.ref.index:
                text = text.replace(f"z={state.ref.index[-1]}", index_label(image, state.ref.index))
        if control.line.text() != text:
            control.line.setText(text)
        control.line.setVisible(bool(text))

    poll = control._poll
    poll.timeout.disconnect()
    poll.timeout.connect(old_refresh if undo else control.refresh)
    policy = QSizePolicy.Policy
    control.line.setSizePolicy(*((policy.Preferred, policy.Preferred) if undo
                                 else (policy.Ignored, policy.Fixed)))


def _row(name: str, seconds: float, gaps: list[float], encoded: int) -> str:
    ms = 1e3 * np.asarray(gaps[1:] or [0.0])
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return (f"{name:8} {seconds:7.2f} {len(ms) / max(seconds, 1e-9):8.0f} {p50:6.0f} "
            f"{p95:6.0f} {p99:6.0f} {ms.max():7.0f} {int((ms > 50).sum()):5} "
            f"{int((ms > 100).sum()):5} {encoded:8}")


def main(argv: list[str] | None = None) -> int:
    """Print the gap distribution (ms) and ticks per second, idle and while encoding ahead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=12)
    parser.add_argument("--size", type=int, default=600, help="rows (columns: 4/3 of it)")
    parser.add_argument("--ahead", type=int, default=3, help="planes encoded ahead")
    parser.add_argument("--encode-s", type=float, default=2.0,
                        help="onnxruntime work added to each encode (seconds)")
    parser.add_argument("--settle", type=float, default=0.6,
                        help="seconds after the step before the ahead row is measured")
    parser.add_argument("--compare", action="store_true",
                        help="the ahead row with the Qt-thread fixes undone, then as shipped")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sample", action="store_true", help="where the Qt thread stalls")
    args = parser.parse_args(argv)

    import napari

    from benchmarks.gui_probes import Ticker
    from benchmarks.stall_sampler import StallSampler
    from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
    from napari_sam3_onnx.testing.geometry import FULL
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    rng = np.random.default_rng(0)
    stack = rng.integers(0, 4000, (args.slices, args.size, args.size * 4 // 3), np.uint16)
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_hf_tracker(Path(tmp) / "toy", FULL)
        graph = _chain_graph(Path(tmp) / "chain.onnx")
        viewer = napari.Viewer(show=True)
        layer = viewer.add_image(stack, name="stack")
        _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
        widget.load_bundle(folder, toy=True)
        _spin(lambda: widget.session.encoder is not None)
        _lengthen_encodes(widget.workspace.adapter, graph, args.encode_s)
        print(f"{stack.shape} stack, toy tracker pair at 1008 px, +{args.encode_s:.1f} s of "
              f"onnxruntime work per encode; load {os.getloadavg()[0]:.1f} at the start")
        print(f"{'row':8} {'run s':>7} {'ticks/s':>8} {'p50':>6} {'p95':>6} {'p99':>6} "
              f"{'max':>7} {'>50':>5} {'>100':>5} {'encoded':>8}   (gaps in ms)")
        scheduler = widget.ahead.scheduler
        sampler = StallSampler(threshold_ms=50) if args.sample else None
        try:
            widget.prefetch.setChecked(False)  # on by default: off for the idle row
            viewer.dims.set_current_step(0, 0)
            _wait(3.0)  # the window settles (not measured)
            ticker = Ticker()
            ticker.start()
            _wait(3.0)
            ticker.stop()
            print(_row("idle", 3.0, ticker.gaps, 0))
            ticker = Ticker()  # a step with encode ahead off: the viewer's own slicing
            ticker.start()
            viewer.dims.set_current_step(0, 2)
            _wait(1.5)
            ticker.stop()
            print(_row("step", 1.5, ticker.gaps, 0))
            scheduler.ahead = args.ahead
            widget.workspace.cache.budget_bytes = 1 << 34  # room for every plane ahead
            modes = (["before", "after"] * args.repeats) if args.compare else ["ahead"]
            z0 = 0  # every row steps 0 -> 1 with nothing cached
            for mode in modes:
                _undo_fixes(widget, mode == "before")
                widget.prefetch.setChecked(False)
                widget.workspace.cache.drop(lambda _key: True)
                viewer.dims.set_current_step(0, z0)
                _wait(1.0)
                widget.prefetch.setChecked(True)
                before = scheduler.encoded
                want = min(args.ahead + 1, args.slices - 1)
                viewer.dims.set_current_step(0, z0 + 1)  # a step up
                _wait(args.settle)  # the step's own stall: the step row
                ticker = Ticker()
                if sampler is not None:
                    sampler.start()
                ticker.start()
                t0 = time.perf_counter()
                _spin(lambda b=before, n=want: scheduler.encoded - b >= n
                      and scheduler.wait_idle(0))
                run = time.perf_counter() - t0
                ticker.stop()
                if sampler is not None:
                    sampler.stop()
                print(_row(mode, run, ticker.gaps, scheduler.encoded - before))
            print(f"load {os.getloadavg()[0]:.1f} at the end; layer {layer.name!r}")
            if sampler is not None:
                sampler.report()
        finally:
            widget.prefetch.setChecked(False)
            viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
