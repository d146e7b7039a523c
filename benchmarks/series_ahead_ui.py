"""Next image of a series -> its first preview, with encode ahead off and on, in a real window.

A folder of ``--images`` non-square uint16 images (a bright disc on each), opened as a series in
the dock with the toy tracker pair built at SAM 3's input size (1008 px); every encode first
runs a chain of matrix products in onnxruntime for ``--encode-s`` seconds (a SAM 3 encode's
shape on a CPU, see :mod:`benchmarks.encode_ahead_ui`). Per row and image: a click on the disc
of the image shown, a dwell of ``--dwell`` seconds (longer than one encode), **Next**, a click
on the next image's disc. Measured: Next until the dock works on the new image (napari adds
and draws the layer), the click until its preview, and the sum; and at how many Next the
next image was already encoded. ``off``:
encode ahead switched off; ``on``: on (it reads and encodes the next image during the dwell).
Rows alternate, ``--repeats`` times. Run under a display:
``xvfb-run -a python -m benchmarks.series_ahead_ui``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.encode_ahead_ui import _chain_graph, _lengthen_encodes, _spin, _wait


def _images(folder: Path, count: int) -> list[tuple[int, int]]:
    """Write ``count`` non-square images; returns each disc's centre ``(row, col)``."""
    import tifffile

    folder.mkdir()
    rng = np.random.default_rng(1)
    centres = []
    for i in range(count):
        rows, cols = (420, 610) if i % 2 == 0 else (530, 380)
        img = rng.integers(200, 400, (rows, cols)).astype(np.uint16)
        r, c = rows // 2 + 17 * i % 40, cols // 3 + 11 * i % 30
        yy, xx = np.ogrid[:rows, :cols]
        img[(yy - r) ** 2 + (xx - c) ** 2 <= 30 ** 2] = 3000
        tifffile.imwrite(folder / f"img{i:02d}.tif", img)
        centres.append((r, c))
    return centres


def main(argv: list[str] | None = None) -> int:
    """Print Next, click -> preview and their sum (medians, s) per row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=7)
    parser.add_argument("--encode-s", type=float, default=1.0)
    parser.add_argument("--dwell", type=float, default=10.0,
                        help="seconds on each image (longer than one encode: see the off row)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--verbose", action="store_true", help="each step's parts")
    args = parser.parse_args(argv)

    import napari

    from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
    from napari_sam3_onnx._napari.layers import same
    from napari_sam3_onnx._napari.series.navigator import ahead_ref
    from napari_sam3_onnx.api.clicks import clicks_need
    from napari_sam3_onnx.testing.geometry import FULL
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    with tempfile.TemporaryDirectory() as tmp:
        folder = build_hf_tracker(Path(tmp) / "toy", FULL)
        graph = _chain_graph(Path(tmp) / "chain.onnx")
        centres = _images(Path(tmp) / "images", args.images)
        viewer = napari.Viewer(show=True)
        _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
        widget.load_bundle(folder, toy=True)
        _spin(lambda: widget.session.encoder is not None)
        _lengthen_encodes(widget.workspace.adapter, graph, args.encode_s)
        session, navigator = widget.session, widget.series.navigator
        starts: list = []
        session.encoder.listen(lambda ref: starts.append(
            (threading.current_thread().name, getattr(ref.source, "name", "layer"))))

        def click(index: int) -> float:
            """A click on image ``index``'s disc; seconds until its preview is shown."""
            t0 = time.perf_counter()
            session.layers.points.add([list(centres[index])])
            _spin(lambda: not session.pending and (session.layers.preview.data > 0).any())
            return time.perf_counter() - t0

        print(f"{args.images} images of 420 x 610 and 530 x 380 px, toy tracker pair at 1008 px, "
              f"+{args.encode_s:.1f} s of onnxruntime work per encode, {args.dwell:.1f} s dwell; "
              f"load {os.getloadavg()[0]:.1f} at the start")
        print(f"{'row':5} {'Next, s':>9} {'click->preview':>15} {'total':>9} "
              f"{'encoded ahead':>13}   click -> preview, each step (medians in s)")
        try:
            for mode in ["off", "on"] * args.repeats:
                widget.prefetch.setChecked(False)
                session.workspace.cache.drop(lambda _key: True)
                widget.series.open(Path(tmp) / "images", out=Path(tmp) / f"out-{time.time_ns()}")
                widget.prefetch.setChecked(mode == "on")
                times, ready, nexts, answers = [], 0, [], []
                for index in range(args.images - 1):
                    click(index)
                    _wait(args.dwell)
                    got = navigator.reads.peek()
                    enc = session.encoder
                    ready += got is not None and enc.key(
                        ahead_ref(got), clicks_need(enc)) in enc.cache
                    t0 = time.perf_counter()
                    navigator.next()  # nothing committed: nothing to save
                    _spin(lambda: session.layers is not None
                          and same(session.layers.image, navigator.layer))
                    shown = time.perf_counter() - t0
                    starts.clear()
                    answer = click(index + 1)
                    times.append(time.perf_counter() - t0)
                    nexts.append(shown)
                    answers.append(answer)
                    if args.verbose:
                        print(f"   next {shown:.2f} s, click -> preview {answer:.2f} s, "
                              f"encodes meanwhile: {starts}")
                print(f"{mode:5} {np.median(nexts):9.2f} {np.median(answers):15.2f} "
                      f"{np.median(times):9.2f} {ready:>6} of {len(times)}   "
                      + " ".join(f"{t:.2f}" for t in answers))
            print(f"load {os.getloadavg()[0]:.1f} at the end")
        finally:
            widget.prefetch.setChecked(False)
            viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
