"""From kept masks to a non-overlapping label image, on a plane or on a tiled large plane."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from napari_sam3_onnx.engine.automatic.generate import AutoMask, generate_masks
from napari_sam3_onnx.engine.automatic.settings import AutoMaskSettings
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.tiling.tiled import input_side, tile_refs
from napari_sam3_onnx.engine.tiling.tiled_search import Part, merge_parts
from napari_sam3_onnx.engine.tiling.tiles import Box, TileSettings
from napari_sam3_onnx.models.base import Embedding, SamAdapter

#: The ``concept`` of every automatic instance (what the tiles' merge groups by).
OBJECT = "object"


@dataclass
class AutoInstance:
    """One object of an automatic segmentation (a row of its table).

    Attributes
    ----------
    id : int
        Its value in the labels.
    score : float
        The decoder's predicted IoU.
    stability : float
        SAM's stability score.
    area : int
        Pixels it holds in the labels (after overlaps went to higher-scoring objects).
    index : tuple[int, ...]
        Plane index along the leading axes.
    box_rc : tuple[float, float, float, float]
        First and last row and column it covers (inclusive).
    """

    id: int
    score: float
    stability: float
    area: int
    index: tuple[int, ...]
    box_rc: tuple[float, float, float, float]


@dataclass
class AutoResult:
    """Labels of one plane and its objects."""

    labels: np.ndarray
    instances: list[AutoInstance] = field(default_factory=list)


def paint(
    masks: Sequence[AutoMask],
    shape: tuple[int, int],
    first_id: int = 1,
    index: tuple[int, ...] = (),
    min_area: int = 0,
) -> AutoResult:
    """A ``(rows, cols)`` int32 label image: ids in order of score, best first.

    A pixel claimed by several masks goes to the highest-scoring one (ties: the more stable,
    then the larger mask first, so a part of an object never splits it); a mask left with no
    pixels (or fewer than ``min_area``) gets no id, so ids stay consecutive.
    """
    out = np.zeros(shape, np.int32)
    result = AutoResult(out)
    next_id = int(first_id)
    for m in sorted(masks, key=lambda m: (-m.score, -m.stability, -m.area)):
        r0, c0, r1, c1 = m.window
        view = out[r0:r1, c0:c1]
        mine = m.mask & (view == 0)
        area = int(np.count_nonzero(mine))
        if area == 0 or area < min_area:
            continue
        view[mine] = next_id
        rr, cc = np.nonzero(mine)
        result.instances.append(AutoInstance(
            next_id, m.score, m.stability, area, tuple(index),
            (float(rr.min() + r0), float(cc.min() + c0), float(rr.max() + r0),
             float(cc.max() + c0))))
        next_id += 1
    return result


def _as_part(m: AutoMask) -> Part:
    return Part(m.crop, m.window, m.mask, OBJECT, m.score)


def _union(members: Sequence[AutoMask]) -> AutoMask:
    """One mask from the pieces of an object cut by tile edges (best piece's scores)."""
    win: Box = (min(m.window[0] for m in members), min(m.window[1] for m in members),
                max(m.window[2] for m in members), max(m.window[3] for m in members))
    mask = np.zeros((win[2] - win[0], win[3] - win[1]), bool)
    for m in members:
        mask |= _as_part(m).crop(win)
    best = max(members, key=lambda m: m.score)
    return AutoMask(win, mask, best.score, best.stability, best.crop, best.point_rc)


def segment_plane(
    adapter: SamAdapter,
    embed: Callable[[SliceRef], Embedding],
    ref: SliceRef,
    settings: AutoMaskSettings | None = None,
    tiling: TileSettings | None = None,
    first_id: int = 1,
    index: tuple[int, ...] = (),
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> AutoResult:
    """Automatic instance segmentation of one plane, tiled when ``tiling`` says so.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``clicks`` capability.
    embed : callable
        ``ref -> Embedding`` (``SliceEncoder.embed``; a store-backed encoder reuses stored
        planes and tiles).
    ref : SliceRef
        The plane (its ``region`` is ignored).
    settings : AutoMaskSettings, optional
        SAM's defaults when None.
    tiling : TileSettings, optional
        Large planes are covered tile by tile, each with the full point grid; masks found twice
        in overlaps or cut by tile edges are joined as text search joins its tiles
        (:func:`~..tiled_search.merge_parts`).
    first_id, index
        First label id, and the plane's index (for the table).
    progress : callable, optional
        ``progress(done, total)`` over tiles (1 of 1 untiled).
    cancelled : callable, optional
        Checked between decoder batches, crops and tiles.

    Returns
    -------
    AutoResult
        ``(rows, cols)`` int32 labels and one :class:`AutoInstance` per object.
    """
    settings = settings or AutoMaskSettings()
    refs = tile_refs(ref, tiling, input_side(adapter)) if tiling is not None else [ref]
    shape = refs[0].plane_shape
    found: list[AutoMask] = []
    for n, tref in enumerate(refs):
        if cancelled is not None and cancelled():
            break
        found += generate_masks(adapter, embed, tref, settings, cancelled)
        if progress is not None:
            progress(n + 1, len(refs))
    if len(refs) > 1:
        groups = merge_parts([_as_part(m) for m in found], shape)
        found = [_union([found[k] for k in g]) for g in groups]
    return paint(found, shape, first_id, index)
