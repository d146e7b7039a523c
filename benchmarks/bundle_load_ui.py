"""Event-loop stalls while the dock opens a full-size bundle (the model panel's Browse path).

Usage::

    xvfb-run -a python -m benchmarks.bundle_load_ui FOLDER [--graphs OTHER] [--reps 3] [--sample]

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
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


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
        print(f"{'rep':>3} {'load s':>7} {'max gap ms':>11} {'ticks/s':>8} {'idle gap ms':>12}")
        try:
            for rep in range(args.reps):
                widget.model.workspace.detach()
                widget.model.info.setText("")
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
                gap, rate = ticker.max_gap_ms, len(ticker.gaps) / run
                idle = idle_stall(ticker, run)  # the same window, idle, as long
                print(f"{rep:3d} {run:7.2f} {gap:11.0f} {rate:8.0f} {idle:12.0f}", flush=True)
                if sampler is not None:
                    sampler.stop()
                    sampler.report()
                widget.model.folder.setText("")  # the next load opens the folder again
        finally:
            viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
