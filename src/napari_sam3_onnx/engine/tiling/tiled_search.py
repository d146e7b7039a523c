"""Text concept search on a large plane, tile by tile, with the tiles' instances stitched.

Each tile is encoded (through the shared cache: once), searched with
:func:`~.concepts.search_slice`, and its instances kept as small crops (no tile embedding or
tile labels stay in memory). Then, per concept:

* **duplicates** -- one object seen by two overlapping tiles -- are merged when their masks'
  IoU *inside the two tiles' overlap* reaches ``iou`` (what each tile sees there is the same
  pixels, so the same object gives the same mask there, however much of it each tile holds);
* **cut objects** -- a mask that reaches an edge of its tile inside the plane -- are joined
  with an instance of another tile that covers at least half of the mask's pixels along that
  edge (on the edge line or just beyond it, so tiles without overlap are stitched too).

Joined instances become one: the union of their masks, the highest score, one fresh id. As in
:func:`~.concepts.search_slice`, a contested pixel goes to the higher-scoring instance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from napari_sam3_onnx.engine.concepts.search import (
    DEFAULT_FLOOR,
    Instance,
    SliceResult,
    TextCache,
    search_slice,
)
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.tiling.tiled import Embedder, input_side, iter_tiles, tile_refs
from napari_sam3_onnx.engine.tiling.tiles import (
    Box,
    TileSettings,
    as_box,
    intersect,
    touches_inner_edge,
)
from napari_sam3_onnx.models.base import SamAdapter

#: Mask IoU inside the overlap of two tiles at which two instances are one object.
DEFAULT_IOU = 0.5


@dataclass
class Part:
    """One instance found on one tile.

    Attributes
    ----------
    tile : Box
        The tile ``(r0, c0, r1, c1)`` it was found on (plane pixels, half-open).
    window : Box
        Half-open plane-pixel window of its mask.
    mask : numpy.ndarray
        ``(r1 - r0, c1 - c0)`` bool mask over ``window``.
    concept : str
        The phrase that found it.
    score : float
        Its detection score.
    """

    tile: Box
    window: Box
    mask: np.ndarray
    concept: str
    score: float

    def crop(self, box: Box) -> np.ndarray:
        """The mask over ``box`` (plane pixels), False outside the window."""
        out = np.zeros((box[2] - box[0], box[3] - box[1]), bool)
        common = intersect(self.window, box)
        if common is not None:
            r0, c0, r1, c1 = common
            out[r0 - box[0]:r1 - box[0], c0 - box[1]:c1 - box[1]] = self.mask[
                r0 - self.window[0]:r1 - self.window[0], c0 - self.window[1]:c1 - self.window[1]]
        return out


def tile_parts(result: SliceResult, tile: Box) -> list[Part]:
    """The instances of a tile's :class:`SliceResult` as plane-coordinate :class:`Part` s."""
    parts = []
    for inst in result.instances:
        r0, c0, r1, c1 = (int(v) for v in inst.box_rc)
        mask = result.labels[r0:r1 + 1, c0:c1 + 1] == inst.id
        window = (r0 + tile[0], c0 + tile[1], r1 + 1 + tile[0], c1 + 1 + tile[1])
        parts.append(Part(as_box(tile), window, mask, inst.concept, inst.score))
    return parts


def _overlap_iou(a: Part, b: Part) -> float:
    ov = intersect(a.tile, b.tile)
    if ov is None:
        return 0.0
    ma, mb = a.crop(ov), b.crop(ov)
    union = np.count_nonzero(ma | mb)
    return np.count_nonzero(ma & mb) / union if union else 0.0


def _edge_joined(a: Part, b: Part, shape: tuple[int, int]) -> bool:
    """Whether ``b`` continues ``a`` across an inner edge of ``a``'s tile that ``a`` touches."""
    if not touches_inner_edge(a.window, a.tile, shape):
        return False
    t, w = a.tile, a.window
    # (edge line inside a's tile, step outwards): top, left, bottom, right
    edges = (((t[0], w[1], t[0] + 1, w[3]), (-1, 0)), ((w[0], t[1], w[2], t[1] + 1), (0, -1)),
             ((t[2] - 1, w[1], t[2], w[3]), (1, 0)), ((w[0], t[3] - 1, w[2], t[3]), (0, 1)))
    for (line, (dr, dc)), inner in zip(edges, (t[0] > 0, t[1] > 0, t[2] < shape[0],
                                               t[3] < shape[1]), strict=True):
        if not inner:
            continue
        on = a.crop(line)
        n = np.count_nonzero(on)
        if n == 0:
            continue
        beyond = (line[0] + dr, line[1] + dc, line[2] + dr, line[3] + dc)
        hit = on & (b.crop(line) | b.crop(beyond))
        if np.count_nonzero(hit) * 2 >= n:
            return True
    return False


def merge_parts(
    parts: Sequence[Part], shape: tuple[int, int], iou: float = DEFAULT_IOU
) -> list[list[int]]:
    """Group parts that are one object (rules in the module docstring).

    Returns
    -------
    list of list of int
        Indices into ``parts``, one list per object, in order of first appearance.
    """
    parent = list(range(len(parts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    win = np.array([p.window for p in parts], np.int64).reshape(-1, 4)
    tiles = np.array([p.tile for p in parts], np.int64).reshape(-1, 4)
    names = np.array([p.concept for p in parts], dtype=object)
    for i, a in enumerate(parts):
        rest = slice(i + 1, None)  # later parts of other tiles, same concept, touching windows
        near = ((win[rest, 0] <= win[i, 2]) & (win[i, 0] <= win[rest, 2])
                & (win[rest, 1] <= win[i, 3]) & (win[i, 1] <= win[rest, 3])
                & (tiles[rest] != tiles[i]).any(axis=1) & (names[rest] == a.concept))
        for j in (int(k) for k in np.flatnonzero(near) + i + 1):
            b = parts[j]
            if find(i) != find(j) and (_overlap_iou(a, b) >= iou or _edge_joined(a, b, shape)
                                       or _edge_joined(b, a, shape)):
                parent[find(j)] = find(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(parts)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def paint(
    parts: Sequence[Part],
    groups: Sequence[Sequence[int]],
    shape: tuple[int, int],
    min_area: int = 0,
    fill_holes: bool = False,
    first_id: int = 1,
    index: tuple[int, ...] = (),
) -> SliceResult:
    """Labels and instances of the merged objects (ids consecutive from ``first_id``)."""
    objects = []
    for group in groups:
        members = [parts[k] for k in group]
        win = (min(p.window[0] for p in members), min(p.window[1] for p in members),
               max(p.window[2] for p in members), max(p.window[3] for p in members))
        mask = np.zeros((win[2] - win[0], win[3] - win[1]), bool)
        for p in members:
            mask |= p.crop(win)
        if fill_holes:
            mask = ndimage.binary_fill_holes(mask)
        objects.append((max(p.score for p in members), members[0].concept, win, mask))
    out = np.zeros(shape, np.int32)
    result = SliceResult(out)
    next_id = first_id
    for score, concept, win, mask in sorted(objects, key=lambda o: -o[0]):
        view = out[win[0]:win[2], win[1]:win[3]]
        mine = mask & (view == 0)
        area = int(np.count_nonzero(mine))
        if area == 0 or area < min_area:
            continue
        view[mine] = next_id
        rr, cc = np.nonzero(mine)
        result.instances.append(Instance(
            next_id, concept, float(score), area, tuple(index),
            (float(rr.min() + win[0]), float(cc.min() + win[1]), float(rr.max() + win[0]),
             float(cc.max() + win[1]))))
        next_id += 1
    return result


def search_tiled(
    adapter: SamAdapter,
    embed: Embedder,
    ref: SliceRef,
    concepts: Sequence[str],
    texts: TextCache,
    settings: TileSettings,
    floor: float = DEFAULT_FLOOR,
    min_area: int = 0,
    fill_holes: bool = False,
    first_id: int = 1,
    index: tuple[int, ...] = (),
    iou: float = DEFAULT_IOU,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> SliceResult:
    """Find every instance of the concepts on a plane, tiled when ``settings`` say so.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``text`` capability.
    embed : callable
        ``ref -> Embedding``; each tile goes through it once (e.g. ``SliceEncoder.embed`` with
        a zero-budget cache, so that only one tile's embedding is alive at a time).
    ref : SliceRef
        The plane (its ``region`` is ignored).
    concepts, texts, floor, min_area, fill_holes, first_id, index
        As in :func:`~.concepts.search_slice` (``min_area`` is applied to merged objects).
    settings : TileSettings
        Tile size and overlap; a plane below the threshold is searched whole.
    iou : float
        Overlap IoU at which two tiles' instances are one object.
    progress : callable, optional
        ``progress(done, total)`` over tiles.
    cancelled : callable, optional
        Checked before each tile; the tiles searched so far are merged and returned.

    Returns
    -------
    SliceResult
        ``(rows, cols)`` int32 labels of the whole plane and one instance per merged object.
    """
    refs = tile_refs(ref, settings, input_side(adapter))
    shape = refs[0].plane_shape
    if refs[0].region is None:
        res = search_slice(adapter, embed(refs[0]), concepts, texts, floor, None, min_area,
                           fill_holes, first_id, index)
        if progress is not None:
            progress(1, 1)
        return res
    parts: list[Part] = []
    cuts: list[float] = []
    for tref, emb in iter_tiles(embed, refs, progress, cancelled):
        res = search_slice(adapter, emb, concepts, texts, floor, None, 0, fill_holes, 1, index)
        parts.extend(tile_parts(res, tref.region))  # type: ignore[arg-type]
        if res.min_score is not None:
            cuts.append(res.min_score)
    result = paint(parts, merge_parts(parts, shape, iou), shape, min_area, fill_holes, first_id,
                   index)
    result.min_score = max(cuts) if cuts else None  # the graph's own cut, as on a whole plane
    return result

