"""Case ``tiling``: encode calls per plane and small-object recall with and without tiles.

Run with ``python benchmarks/run.py --no-gui --cases tiling`` (figures in
docs/large-images.md). Runs on the toy test graphs (84-px input, the SAM 3 geometry scaled by
1/12: 14-px patches on a 6 x 6 grid, 24 x 24 masks), so the counts of encoder calls are real
and the recall numbers show the *squeeze* effect, not SAM 3's accuracy. Four groups of rows
(``extra["table"]``): tiles per plane (grid arithmetic, default settings), clicks on 7-px discs
by encoding, the squeeze sweep (whole plane), and text search on 14-px squares.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from napari_sam3_onnx.engine.cache import EmbeddingCache
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tiling.tiled import segment_on
from napari_sam3_onnx.engine.tiling.tiled_search import search_tiled
from napari_sam3_onnx.engine.tiling.tiles import TileSettings, tile_grid
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

from .report import Row

CASE = "tiling"
NO_TILES = TileSettings(threshold=10**9)
ENCODINGS = (("whole plane (squeezed)", NO_TILES), ("tiles 84 px (1:1)", TileSettings()),
             ("tiles 126 px (downscale 1.5)", TileSettings(downscale=1.5)),
             ("tiles 168 px (downscale 2)", TileSettings(downscale=2.0)))


def _spread(rng, shape, n, gap, edge=12):
    """``n`` (row, col) positions at least ``gap`` px apart, ``edge`` px inside the plane."""
    out: list[tuple[int, int]] = []
    while len(out) < n:
        p = (int(rng.integers(edge, shape[0] - edge)), int(rng.integers(edge, shape[1] - edge)))
        if all(max(abs(p[0] - q[0]), abs(p[1] - q[1])) >= gap for q in out):
            out.append(p)
    return out


def click_recall(adapter, shape, rad, settings, n=24, seed=0):
    """Fraction of discs found by one click each (mask IoU >= 0.3), and encoder calls."""
    rng = np.random.default_rng(seed)
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    centres = _spread(rng, shape, n, 40)
    img = np.full(shape, 10, np.uint8)
    discs = [(rr - r) ** 2 + (cc - c) ** 2 <= rad**2 for r, c in centres]
    for d in discs:
        img[d] = 220
    enc = SliceEncoder(adapter)
    ref = SliceRef(img, (), source=("clicks", shape))
    hits = 0
    for (r, c), d in zip(centres, discs, strict=True):
        m = segment_on(adapter, enc.embed, ref, Prompt.clicks([[r, c]]), tiling=settings).mask
        hits += (m & d).sum() / max((m | d).sum(), 1) >= 0.3
    return hits / n, enc.encoder_calls


def text_recall(adapter, texts, shape, side, settings, n=20, seed=1, lattice=False):
    """Fraction of ``side``-px squares labelled (>= half their pixels, one id), calls, seconds."""
    rng = np.random.default_rng(seed)
    img = np.full(shape, 10, np.uint8)
    if lattice:  # inside the 21-px cells the default toy grid shares
        cells = _spread(rng, (shape[0] // 21, shape[1] // 21), n, 2, edge=0)
        spots = [(21 * r + 3, 21 * c + 3) for r, c in cells]
    else:
        spots = _spread(rng, (shape[0] - side, shape[1] - side), n, side + 30, edge=4)
    for r, c in spots:
        img[r:r + side, c:c + side] = 220
    enc = SliceEncoder(adapter, EmbeddingCache(budget_bytes=0))
    t = time.perf_counter()
    res = search_tiled(adapter, enc.embed, SliceRef(img, (), source="text"), ["nucleus"], texts,
                       settings)
    dt = time.perf_counter() - t
    found = 0
    for r, c in spots:
        sq = res.labels[r:r + side, c:c + side]
        ids = set(np.unique(sq)) - {0}
        found += len(ids) == 1 and (sq > 0).mean() >= 0.5
    return found / n, enc.encoder_calls, dt, len(res.instances)


def _row(table: str, layout: str, value: float, unit: str, note: str, **extra) -> Row:
    return Row(CASE, layout, geometry="toy-84", value=float(value), unit=unit, note=note,
               extra={"table": table, **extra})


def grid_rows() -> list[Row]:
    """Tiles per plane at the default settings (1:1 tiles, 1/4 overlap), grid arithmetic."""
    out = []
    for s_in, plane in ((1008, (2048, 2048)), (1008, (4096, 4096)), (1008, (10000, 10000)),
                        (84, (600, 900)), (84, (1200, 1800))):
        st = TileSettings()
        n = len(tile_grid(plane, st.side(s_in), st.overlap_px(s_in))) if st.applies(
            plane, s_in) else 1
        out.append(_row("tiles per plane", "-", n, "tiles",
                        f"input {s_in}, plane {plane[0]}x{plane[1]}",
                        threshold=st.threshold_px(s_in)))
    return out


def click_rows(hf, quick: bool) -> list[Row]:
    """Clicks on the toy SAM head: discs of radius 3 (7 px), 24 per plane, by encoding."""
    out = []
    shapes = ((600, 900),) if quick else ((600, 900), (1200, 1800))
    for shape in shapes:
        for name, st in ENCODINGS[:2] if quick else ENCODINGS:
            rec, calls = click_recall(hf, shape, 3, st, n=4 if quick else 24)
            out.append(_row("clicks", "hf-tracker", rec, "recall",
                            f"{shape[0]}x{shape[1]}, {name}", encoder_calls=calls))
    if quick:
        return out
    for rows in (84, 126, 168, 252, 336, 420):  # the squeeze sweep: whole plane
        shape = (rows, rows * 3 // 2)
        rec, _ = click_recall(hf, shape, 3, NO_TILES, n=min(24, rows * rows // 4000 + 3))
        fr, fc = rows / 84, shape[1] / 84
        out.append(_row("squeeze sweep", "hf-tracker", rec, "recall",
                        f"{shape[0]}x{shape[1]}, squeeze {fr:.1f}/{fc:.1f}, disc "
                        f"{7 / fr:.1f}x{7 / fc:.1f} model px"))
    return out


def text_rows(wk, texts, quick: bool) -> list[Row]:
    """Text search on the toy detector: 14-px squares, 20 per plane."""
    out = []
    for shape in ((336, 525),) if quick else ((336, 525), (672, 1050)):
        for lattice in (True, False):
            for name, st in (("whole plane", NO_TILES), ("tiles 84 px", TileSettings())):
                rec, calls, dt, k = text_recall(wk, texts, shape, 14, st, n=4 if quick else 20,
                                                lattice=lattice)
                place = "in query cells" if lattice else "random"
                out.append(_row("text", "wkentaro-v0.3", rec, "recall",
                                f"{shape[0]}x{shape[1]}, {place}, {name}",
                                encoder_calls=calls, instances=k, seconds=dt))
    return out


def rows(root: Path, quick: bool) -> list[Row]:
    """Every group's rows (``quick``: one plane size, a few objects, two encodings)."""
    hf = open_adapter(build_hf_tracker(root / "tiling-hf"))
    wk_dir = build_wkentaro_v03(root / "tiling-wk")
    write_toy_tokenizer(wk_dir)
    wk = open_adapter(wk_dir)
    try:
        texts = TextCache(wk, ClipTokenizer.from_folder(
            wk_dir, wk.concept_detector.context_length))
        return grid_rows() + click_rows(hf, quick) + text_rows(wk, texts, quick)
    finally:
        hf.close()
        wk.close()
