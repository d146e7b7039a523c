"""Event-loop stalls while the dock opens a full-size bundle (the model panel's Browse path).

Usage::

    xvfb-run -a python -m benchmarks.bundle_load_ui FOLDER [--graphs OTHER] [--reps 3] [--sample]
        [--cold] [--label NAME]

``FOLDER`` is a bundle; with ``--graphs OTHER``, a temporary folder links ``FOLDER``'s graphs
and every file of ``OTHER`` that ``FOLDER`` lacks (e.g. a full-depth export's
``image_encoder.onnx`` beside a reduced export's other graphs, manifest and tokenizer), so a
full-size encoder header is parsed without a full-depth export of every graph. A real napari
window with the dock opened the napari way; each repetition calls
``ModelPanel.load_in_background`` (what Browse does: headers and tokenizer read in a worker)
and waits until the model line shows the bundle. A 10 ms ``QTimer``
(:class:`benchmarks.gui_probes.Ticker`) records the largest gap between its ticks meanwhile;
``--sample`` prints the Qt thread's stacks seen during gaps over 50 ms. Load only: nothing is
encoded.

Per load it prints the gaps' p50, p95 and max, the same timer's max over an idle loop as long
right after (the machine's own noise), ``qt ms``: the time the Qt thread spent in the panel's
own code when the load ended (``ModelPanel._opened``, the tabs' refresh included), ``wk cpu``:
the worker thread's CPU time in ``open_checked`` (interpreter time the Qt thread competes with
for the GIL; I/O waits excluded), and the one-minute load average. ``--cold`` empties the
header and tokenizer caches before every load (the first open of a bundle in a session);
without it, loads after the first find them filled (a bundle opened again). A full-size
bundle without a full-depth export: ``python -m benchmarks.deep_encoder
REDUCED/image_encoder.onnx FULL/image_encoder.onnx``, then ``FULL --graphs REDUCED``
(docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def empty_caches() -> None:
    """Forget every header and tokenizer read so far (absent in older trees: nothing to do)."""
    import importlib

    for module, name in (("napari_sam3_onnx.models.graph_info", "SIGNATURES"),
                         ("napari_sam3_onnx.models.graph_nodes", "NODES"),
                         ("napari_sam3_onnx.engine.concepts.tokenizer", "BUILT")):
        cache = getattr(importlib.import_module(module), name, None)
        if cache is not None:
            cache.clear()


def percentile_ms(gaps: list[float], q: float) -> float:
    """The ``q``-th percentile of ``gaps`` (seconds), in ms."""
    import numpy as np

    return 1e3 * float(np.percentile(gaps, q)) if gaps else 0.0


def timed(owner, name: str, spent: list[float], clock=time.perf_counter) -> None:
    """Wrap ``owner.name`` so the ``clock`` seconds each call takes are appended to ``spent``."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(clock() - t0)

    setattr(owner, name, wrapper)


def merged(folder: Path, other: Path, where: Path) -> Path:
    """``where`` with a link to every file of ``folder`` and to those of ``other`` it lacks."""
    where.mkdir()
    for source in (folder, other):
        for path in source.iterdir():
            if path.is_file() and not (where / path.name).exists():
                (where / path.name).symlink_to(path.resolve())
    return where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--graphs", type=Path, default=None,
                        help="a folder whose files complete FOLDER's (linked, not copied)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sample", action="store_true")
    parser.add_argument("--cold", action="store_true",
                        help="empty the header and tokenizer caches before every load")
    parser.add_argument("--label", default="", help="a word printed on every row (old, new)")
    args = parser.parse_args(argv)

    import napari

    from benchmarks.gui_probes import Ticker, idle_stall
    from benchmarks.stack_runs_ui import _wait
    from benchmarks.stall_sampler import StallSampler
    from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder if args.graphs is None else \
            merged(args.folder, args.graphs, Path(tmp) / "bundle")
        viewer = napari.Viewer(show=True)
        _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
        _wait(lambda: True)
        # the window's first show (OpenGL set-up, first paints, dock layout) runs for a second
        # or so after it opens: measured apart, so it is not counted as the first load's
        settle = idle_stall(Ticker(), 2.0)
        print(f"window settling: max gap {settle:.0f} ms over 2 s (not a load)")
        from napari_sam3_onnx._napari.model import panel as model_panel

        spent: list[float] = []
        worker: list[float] = []
        timed(widget.model, "_opened", spent)  # the Qt thread's own work once the worker ends
        timed(model_panel, "open_checked", worker, time.thread_time)  # the worker's CPU
        print(f"{'':6}{'rep':>3} {'load s':>7} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} "
              f"{'idle max':>8} {'qt ms':>6} {'wk cpu':>6} {'load avg':>8}")
        try:
            for rep in range(args.reps):
                widget.model.workspace.detach()
                widget.model.info.setText("")
                if args.cold:
                    empty_caches()
                spent.clear()
                worker.clear()
                ticker, sampler = Ticker(), StallSampler() if args.sample else None
                ticker.start()
                if sampler is not None:
                    sampler.start()
                t0 = time.perf_counter()
                widget.model.load_in_background(folder)
                _wait(lambda: widget.model.adapter is not None and widget.model.info.text()
                      and "Opening" not in widget.model.info.text())
                run = time.perf_counter() - t0
                ticker.stop()
                gaps = list(ticker.gaps)
                p50, p95, gap = (percentile_ms(gaps, 50), percentile_ms(gaps, 95),
                                 ticker.max_gap_ms)
                idle = idle_stall(ticker, run)  # the same window, idle, as long
                print(f"{args.label:6}{rep:3d} {run:7.2f} {p50:7.0f} {p95:7.0f} {gap:7.0f} "
                      f"{idle:8.0f} {1e3 * sum(spent):6.0f} {1e3 * sum(worker):6.0f} "
                      f"{os.getloadavg()[0]:8.1f}",
                      flush=True)
                if sampler is not None:
                    sampler.stop()
                    sampler.report()
                widget.model.folder.setText("")  # the next load opens the folder again
        finally:
            viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
