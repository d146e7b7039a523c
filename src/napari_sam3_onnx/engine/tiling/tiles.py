"""Tiles and fields of view: which rectangles of a large plane to encode.

SAM 3 stretches whatever it encodes into its square input (1008 px, read as 72 x 72 patches of
14 px), so on a 2048 x 2048 field a 20-px nucleus becomes a 10-px speck, smaller than one patch.
Encoding square *tiles* of the plane (or the *field of view* the viewer shows) keeps objects
large in model pixels. This module is the geometry only: tile grids, the tile a prompt is best
answered on, and the snapped field-of-view rectangle. :mod:`.tiled` encodes and prompts them.

Every rectangle (a *box*) is ``(r0, c0, r1, c1)``: half-open integer rows ``r0:r1`` and columns
``c0:c1`` of the plane, numpy order (row first). Prompt extents are float pixel-centre positions
``(r0, c0, r1, c1)`` with ``r1``/``c1`` inclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Box = tuple[int, int, int, int]

#: Planes whose long side exceeds this many model inputs are tiled: 2 x 1008 = 2016 px in SAM 3
#: (see docs/large-images.md: beyond a 2x squeeze a 28-px object falls below one 14-px patch).
THRESHOLD_INPUTS = 2.0
#: Default overlap of neighbouring tiles, as a fraction of the tile side (micro-sam's 384/64
#: halo is ~1/3 on each side; a quarter keeps the tile count down).
OVERLAP_FRACTION = 0.25


@dataclass(frozen=True)
class TileSettings:
    """How to cut a large plane into tiles.

    Attributes
    ----------
    size : int or None
        Tile side in native (plane) pixels. None: ``downscale`` x the model input side.
    downscale : float
        Native pixels per model pixel when ``size`` is None: 1.0 encodes at full resolution
        (1008-px tiles for SAM 3), 2.0 covers twice the width per tile at half the detail.
    overlap : int or None
        Pixels shared by neighbouring tiles (None: a quarter of the side). Any object no wider
        than the overlap lies whole inside at least one tile.
    threshold : int or None
        Only planes whose long side exceeds this are tiled (None: :data:`THRESHOLD_INPUTS` x
        the model input side, 2016 px for SAM 3).
    margin : int or None
        Distance in pixels a prompt must keep from a tile edge inside the plane for that tile to
        answer it (None: half the overlap, which the grid always offers for a click).
    """

    size: int | None = None
    downscale: float = 1.0
    overlap: int | None = None
    threshold: int | None = None
    margin: int | None = None

    def side(self, input_side: int) -> int:
        """Tile side in native pixels for a model whose input is ``input_side`` px."""
        if self.size is not None:
            side = int(self.size)
        else:
            side = round(float(self.downscale) * int(input_side))
        if side < 2:
            raise ValueError(f"a tile must be at least 2 px wide, got {side}")
        return side

    def overlap_px(self, input_side: int) -> int:
        """Overlap in pixels (less than the side)."""
        side = self.side(input_side)
        ov = round(side * OVERLAP_FRACTION) if self.overlap is None else int(self.overlap)
        return max(0, min(ov, side - 1))

    def margin_px(self, input_side: int) -> int:
        """Margin in pixels a prompt needs from an inner tile edge."""
        if self.margin is not None:
            return max(0, int(self.margin))
        return self.overlap_px(input_side) // 2

    def threshold_px(self, input_side: int) -> int:
        """Long side in pixels above which a plane is tiled."""
        if self.threshold is not None:
            return int(self.threshold)
        return round(THRESHOLD_INPUTS * int(input_side))

    def applies(self, plane_shape: Sequence[int], input_side: int) -> bool:
        """Whether a ``(rows, cols)`` plane is tiled."""
        return max(int(plane_shape[0]), int(plane_shape[1])) > self.threshold_px(input_side)

    def grid(self, plane_shape: Sequence[int], input_side: int) -> list[Box]:
        """The tiles a ``(rows, cols)`` plane is cut into (:func:`tile_grid`); [] untiled."""
        if not self.applies(plane_shape, input_side):
            return []
        return tile_grid(plane_shape, self.side(input_side), self.overlap_px(input_side))


def as_box(values: Sequence[float]) -> Box:
    """``(r0, c0, r1, c1)`` as Python ints (from a tuple, list or array of four numbers)."""
    r0, c0, r1, c1 = values
    return (int(r0), int(c0), int(r1), int(c1))


def as_tiling(tile: TileSettings | int | None) -> TileSettings | None:
    """Tile settings from an API or command-line value.

    An int is a tile side in pixels (planes longer than one tile are tiled), settings pass
    through, None means no tiling.
    """
    if tile is None or isinstance(tile, TileSettings):
        return tile
    side = int(tile)
    if side < 2:
        raise ValueError(f"a tile must be at least 2 px wide, got {side}")
    return TileSettings(size=side, threshold=side)


def _starts(n: int, side: int, stride: int) -> list[int]:
    """Start offsets of tiles of ``side`` px over ``n`` px; the last one ends at ``n``."""
    if n <= side:
        return [0]
    starts = list(range(0, n - side, max(stride, 1)))
    if starts[-1] != n - side:
        starts.append(n - side)
    return starts


def tile_grid(plane_shape: Sequence[int], side: int, overlap: int) -> list[Box]:
    """Square tiles covering a plane, row-major, neighbours sharing ``overlap`` pixels or more.

    Parameters
    ----------
    plane_shape : Sequence[int]
        ``(rows, cols)`` of the plane.
    side : int
        Tile side in pixels; along an axis shorter than ``side`` a tile spans the whole axis.
    overlap : int
        Minimum overlap; the last tile of a row or column is aligned to the plane's end, so it
        can overlap its neighbour by more.

    Returns
    -------
    list of Box
        ``(r0, c0, r1, c1)`` boxes.
    """
    rows, cols = int(plane_shape[0]), int(plane_shape[1])
    stride = side - overlap
    h, w = min(side, rows), min(side, cols)
    return [(r, c, r + h, c + w) for r in _starts(rows, side, stride)
            for c in _starts(cols, side, stride)]


def inner_margin(tile: Box, extent: Sequence[float], plane_shape: Sequence[int]) -> float:
    """Smallest distance from ``extent`` to an edge of ``tile`` that lies inside the plane.

    Edges on the plane's border cut nothing and do not count (``inf`` when all four are
    there). Negative when ``extent`` sticks out of the tile.
    """
    rows, cols = int(plane_shape[0]), int(plane_shape[1])
    r0, c0, r1, c1 = extent
    gaps = []
    if tile[0] > 0 or r0 < tile[0]:
        gaps.append(r0 - tile[0])
    if tile[1] > 0 or c0 < tile[1]:
        gaps.append(c0 - tile[1])
    if tile[2] < rows or r1 > tile[2] - 1:
        gaps.append(tile[2] - 1 - r1)
    if tile[3] < cols or c1 > tile[3] - 1:
        gaps.append(tile[3] - 1 - c1)
    return min(gaps) if gaps else math.inf


def centred_tile(
    extent: Sequence[float], plane_shape: Sequence[int], side: int, margin: int, snap: int = 1
) -> Box:
    """A square tile centred on ``extent``, big enough to hold it with ``margin`` around it.

    The side is ``side``, or more when the extent plus margins (plus ``snap``) needs it. The
    start is rounded to a multiple of ``snap`` (nearby prompts then share one tile and its
    embedding) and the tile is shifted inside the plane (and cut to it when the plane is
    smaller; edges on the plane's border need no margin).
    """
    rows, cols = int(plane_shape[0]), int(plane_shape[1])
    r0, c0, r1, c1 = (float(v) for v in extent)
    snap = max(int(snap), 1)
    # rounding the start moves the tile by up to snap / 2: room for that keeps the margin
    need = max(r1 - r0, c1 - c0) + 1 + 2 * margin + (snap if snap > 1 else 0)
    s = max(int(side), math.ceil(need))
    out = []
    for lo, hi, n in ((r0, r1, rows), (c0, c1, cols)):
        length = min(s, n)
        start = round(((lo + hi + 1) / 2 - length / 2) / snap) * snap
        out.append((min(max(start, 0), n - length), length))
    (rs, rl), (cs, cl) = out
    return (rs, cs, rs + rl, cs + cl)


def pick_tile(
    grid: Sequence[Box],
    extent: Sequence[float],
    plane_shape: Sequence[int],
    side: int,
    margin: int,
    snap: int | None = None,
) -> Box:
    """The tile to answer a prompt on.

    The grid tile holding ``extent`` with the largest margin to its inner edges, if that margin
    is at least ``margin``; otherwise a tile centred on the extent (:func:`centred_tile`, start
    snapped to ``snap``, default an eighth of the side).

    Parameters
    ----------
    grid : Sequence[Box]
        From :func:`tile_grid`.
    extent : Sequence[float]
        ``(r0, c0, r1, c1)`` pixel-centre extent of the prompt (clicks and box), inclusive.
    plane_shape : Sequence[int]
        ``(rows, cols)``.
    side, margin : int
        Tile side and wanted margin in pixels.
    """
    best, best_gap = None, -math.inf
    for tile in grid:
        gap = inner_margin(tile, extent, plane_shape)
        if gap > best_gap:
            best, best_gap = tile, gap
    if best is not None and best_gap >= margin:
        return best
    return centred_tile(extent, plane_shape, side, margin, snap or max(1, side // 8))


def touches_inner_edge(window: Box, tile: Box, plane_shape: Sequence[int]) -> bool:
    """Whether a mask's half-open ``window`` reaches an edge of ``tile`` inside the plane.

    Such a mask may have been cut by the tile (edges on the plane's border cut nothing).
    """
    rows, cols = int(plane_shape[0]), int(plane_shape[1])
    return ((window[0] <= tile[0] and tile[0] > 0) or (window[1] <= tile[1] and tile[1] > 0)
            or (window[2] >= tile[2] and tile[2] < rows)
            or (window[3] >= tile[3] and tile[3] < cols))


def intersect(a: Box, b: Box) -> Box | None:
    """The overlap of two boxes, None when they share no pixel."""
    r0, c0 = max(a[0], b[0]), max(a[1], b[1])
    r1, c1 = min(a[2], b[2]), min(a[3], b[3])
    return (r0, c0, r1, c1) if r1 > r0 and c1 > c0 else None


def fov_region(
    visible: Sequence[float],
    plane_shape: Sequence[int],
    step: int | None = None,
    pad: int | None = None,
) -> Box | None:
    """The rectangle to encode for a field of view: visible pixels, padded, snapped, clipped.

    Parameters
    ----------
    visible : Sequence[float]
        ``(r0, c0, r1, c1)`` of the view in plane data coordinates (pixel ``i`` covers
        ``i - 0.5 .. i + 0.5``); it may extend beyond the plane.
    plane_shape : Sequence[int]
        ``(rows, cols)``.
    step : int, optional
        Snap edges outwards to multiples of ``step`` px. Default: the power of two nearest to a
        sixteenth of the visible side, so views a few percent apart give the same box.
    pad : int, optional
        Pixels added around the view before snapping (default ``step``): a pan smaller than
        this stays inside the box (see :func:`fov_reusable`).

    Returns
    -------
    Box or None
        None when no pixel of the plane is visible. ``step=1, pad=0`` gives the visible pixels.
    """
    rows, cols = int(plane_shape[0]), int(plane_shape[1])
    r0, c0 = math.floor(visible[0] + 0.5), math.floor(visible[1] + 0.5)
    r1, c1 = math.ceil(visible[2] + 0.5), math.ceil(visible[3] + 0.5)
    if min(r1, rows) <= max(r0, 0) or min(c1, cols) <= max(c0, 0):
        return None
    if step is None:
        span = max(min(r1, rows) - max(r0, 0), min(c1, cols) - max(c0, 0)) / 16
        step = 2 ** max(0, round(math.log2(span))) if span >= 1 else 1
    step = max(int(step), 1)
    pad = step if pad is None else max(int(pad), 0)
    r0, c0, r1, c1 = r0 - pad, c0 - pad, r1 + pad, c1 + pad
    return (max(0, (r0 // step) * step), max(0, (c0 // step) * step),
            min(rows, -(-r1 // step) * step), min(cols, -(-c1 // step) * step))


def fov_reusable(previous: Box | None, current: Box | None, max_area_ratio: float = 2.5) -> bool:
    """Whether the embedding of region ``previous`` still serves the visible box ``current``.

    It does while it contains ``current`` and is not much larger: a zoom-in by more than about
    ``sqrt(max_area_ratio / 1.6)`` (a fresh box is up to ~1.6 x the visible area) deserves a
    sharper embedding.
    """
    if previous is None or current is None:
        return False
    inside = (previous[0] <= current[0] and previous[1] <= current[1]
              and previous[2] >= current[2] and previous[3] >= current[3])
    area = (current[2] - current[0]) * (current[3] - current[1])
    big = (previous[2] - previous[0]) * (previous[3] - previous[1])
    return inside and big <= max_area_ratio * area
