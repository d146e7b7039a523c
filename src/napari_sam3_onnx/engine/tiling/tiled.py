"""Encode and prompt parts of a plane: tiles of a large plane, or the viewer's field of view.

Each tile or view rectangle is a :class:`~.encoding.SliceRef` with a ``region``; it is encoded
once and cached like a slice (the region is part of the cache key and of the store entry). A
prompt is answered on one region and its mask written back into the whole plane at native
resolution. With tiling, an object that reaches a tile edge inside the plane is prompted again
on a tile centred on it, so it comes out whole.

Coordinates: ``(row, col)`` plane pixels; boxes ``(r0, c0, r1, c1)`` half-open
(:mod:`.tiling`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from napari_sam3_onnx.engine import coords
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt, prepare_prompt
from napari_sam3_onnx.engine.interactive_dispatch import segment_prompt
from napari_sam3_onnx.engine.slices import _default_limits, extract_plane
from napari_sam3_onnx.engine.tiling.tiles import (
    Box,
    TileSettings,
    as_box,
    centred_tile,
    pick_tile,
    tile_grid,
    touches_inner_edge,
)
from napari_sam3_onnx.models.base import Embedding, SamAdapter
from napari_sam3_onnx.models.errors import PromptError

#: ``ref -> Embedding``: how a region is embedded (``SliceEncoder.embed``, or a locked variant).
Embedder = Callable[[SliceRef], Embedding]
#: Re-prompts on a recentred tile before the last mask is accepted as it is.
MAX_MOVES = 2


def input_side(adapter: SamAdapter) -> int:
    """The model's input side in pixels (1008 for SAM 3)."""
    return int(max(adapter.input_size))


def with_plane_window(ref: SliceRef) -> SliceRef:
    """``ref`` with its contrast window fixed for the whole plane.

    Without a window, non-uint8 planes are mapped through their own min..max; a tile or view
    must use the *plane's* range, not its own, or each tile would be contrasted differently.
    This reads the plane once (pass a window to avoid it).
    """
    if ref.window is not None or np.dtype(ref.data.dtype) == np.uint8:  # type: ignore[attr-defined]
        return ref
    plane = extract_plane(ref.data, ref.index, ref.rgb)
    return replace(ref, window=_default_limits(plane[..., :3] if ref.rgb else plane))


def tile_refs(ref: SliceRef, settings: TileSettings, side_in: int) -> list[SliceRef]:
    """The plane itself if it is small enough, else one ref per tile (window fixed first)."""
    plane = replace(ref, region=None)
    grid = settings.grid(plane.plane_shape, side_in)
    if not grid:
        return [plane]
    plane = with_plane_window(plane)
    return [replace(plane, region=box) for box in grid]


def iter_tiles(
    embed: Embedder,
    refs: list[SliceRef],
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[tuple[SliceRef, Embedding]]:
    """Embed tiles one after the other, yielding ``(ref, embedding)``; nothing is kept here.

    ``progress(done, total)`` is called after each tile; ``cancelled()`` is checked before each.
    """
    for n, ref in enumerate(refs):
        if cancelled is not None and cancelled():
            return
        emb = embed(ref)
        if progress is not None:
            progress(n + 1, len(refs))
        yield ref, emb


def prompt_extent(prompt: Prompt, plane_shape: tuple[int, int]) -> tuple[float, ...] | None:
    """``(r0, c0, r1, c1)`` pixel-centre extent of a prompt's box and positive clicks.

    Negative clicks count only when there is nothing else. None when no part of the prompt
    lies on the plane (exactly when :func:`~.interactive.prepare_prompt` refuses it).
    """
    on = coords.inside(prompt.points_rc, plane_shape)
    pts, labs = prompt.points_rc[on].reshape(-1, 2), prompt.labels[on]
    box = None if prompt.box_rc is None else coords.normalise_box_rc(prompt.box_rc, plane_shape)
    parts = [pts[labs == 1] if (labs == 1).any() or box is not None else pts]
    if box is not None:
        parts.append(box.reshape(2, 2))
    allpts = np.concatenate(parts, axis=0)
    if len(allpts) == 0:
        return None
    lo = np.clip(allpts.min(axis=0), 0, np.asarray(plane_shape) - 1)
    hi = np.clip(allpts.max(axis=0), 0, np.asarray(plane_shape) - 1)
    return (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]))


def _local_prompt(prompt: Prompt, region: Box) -> Prompt:
    """The prompt in the region's coordinates; old logits only if they came from this region."""
    off = np.array([region[0], region[1]], np.float64)
    box = None if prompt.box_rc is None else prompt.box_rc - np.tile(off, 2)
    same = prompt.mask_region is not None and tuple(prompt.mask_region) == tuple(region)
    logits = prompt.mask_logits if same else None
    return Prompt(prompt.points_rc - off, prompt.labels, box, logits, as_box(region))


def segment_local(
    adapter: SamAdapter, embedding: Embedding, region: Box, prompt: Prompt,
    texts: TextCache | None = None,
) -> ObjectMask:
    """Answer a plane prompt on a region's embedding; the mask covers the region only."""
    res = segment_prompt(adapter, embedding, _local_prompt(prompt, region), texts)
    return replace(res, region=as_box(region))


def place(local: ObjectMask, plane_shape: tuple[int, int]) -> ObjectMask:
    """The region-sized mask of ``local`` written into a ``(rows, cols)`` bool plane mask."""
    r0, c0, r1, c1 = local.region  # type: ignore[misc]
    full = np.zeros(tuple(int(s) for s in plane_shape), bool)
    full[r0:r1, c0:c1] = local.mask
    return replace(local, mask=full)


def _window(mask: np.ndarray, region: Box) -> Box | None:
    """Half-open plane-pixel window of a region-sized mask's True pixels."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    return (int(rows[0]) + region[0], int(cols[0]) + region[1],
            int(rows[-1]) + 1 + region[0], int(cols[-1]) + 1 + region[1])


def first_tile(
    adapter: SamAdapter, ref: SliceRef, prompt: Prompt, settings: TileSettings
) -> SliceRef:
    """The tile :func:`segment_tiled` answers ``prompt`` on first (window fixed for the plane).

    The plane itself when no part of the prompt lies on it.
    """
    plane = with_plane_window(replace(ref, region=None))
    shape = plane.plane_shape
    extent = prompt_extent(prompt, shape)
    if extent is None:
        return plane
    s_in = input_side(adapter)
    side, margin = settings.side(s_in), settings.margin_px(s_in)
    grid = tile_grid(shape, side, settings.overlap_px(s_in))
    return replace(plane, region=pick_tile(grid, extent, shape, side, margin))


def segment_tiled(
    adapter: SamAdapter,
    embed: Embedder,
    ref: SliceRef,
    prompt: Prompt,
    settings: TileSettings,
    texts: TextCache | None = None,
    max_moves: int = MAX_MOVES,
) -> ObjectMask:
    """Segment one object of a large plane on the best tile for it.

    The tile is the grid tile that holds the prompt with the most margin, or a tile centred on
    the prompt (:func:`~.tiling.pick_tile`). When the mask reaches an edge of its tile inside
    the plane, the prompt is answered again on a tile centred on prompt and mask together (grown
    when the object needs it), at most ``max_moves`` times.

    Parameters
    ----------
    adapter : SamAdapter
        The bundle.
    embed : callable
        ``ref -> Embedding`` (e.g. ``SliceEncoder.embed``); each tile is embedded through it.
    ref : SliceRef
        The plane (its ``region`` is ignored).
    prompt : Prompt
        Clicks and/or box in plane coordinates.
    settings : TileSettings
        Tile size, overlap and margin.
    texts : TextCache, optional
        For detector-only bundles (a box answered through exemplars).

    Returns
    -------
    ObjectMask
        ``mask`` is ``(rows, cols)`` bool over the whole plane; ``region`` the tile used.
    """
    first = first_tile(adapter, ref, prompt, settings)
    plane, shape = replace(first, region=None), first.plane_shape
    extent = prompt_extent(prompt, shape)
    if extent is None:  # nothing on the plane: say why, without encoding anything
        prepare_prompt(prompt, shape, adapter.input_size)
        raise PromptError("No click lies inside the image; click on the object.")
    tile: Box = first.region  # type: ignore[assignment]
    s_in = input_side(adapter)
    side, margin = settings.side(s_in), settings.margin_px(s_in)
    tried: set[Box] = set()
    while True:
        tried.add(tile)
        local = segment_local(adapter, embed(replace(plane, region=tile)), tile, prompt, texts)
        win = _window(local.mask, tile) if local.present else None
        if win is None or not touches_inner_edge(win, tile, shape) or len(tried) > max_moves:
            return place(local, shape)
        both = (min(extent[0], win[0]), min(extent[1], win[1]),
                max(extent[2], win[2] - 1), max(extent[3], win[3] - 1))
        moved = centred_tile(both, shape, side, margin, max(1, side // 8))
        if moved in tried:
            return place(local, shape)
        tile = moved


def for_plane(prompt: Prompt) -> Prompt:
    """``prompt`` for the whole plane: logits of a tile or a view are not fed back there."""
    if prompt.mask_region is None:
        return prompt
    return replace(prompt, mask_logits=None, mask_region=None)


def segment_on(
    adapter: SamAdapter,
    embed: Embedder,
    ref: SliceRef,
    prompt: Prompt,
    texts: TextCache | None = None,
    tiling: TileSettings | None = None,
) -> ObjectMask:
    """Segment one object on the field of view, on tiles, or on the whole plane.

    On ``ref.region`` (a field of view) when set, on tiles when ``tiling`` applies to the plane,
    else on the whole plane. ``mask`` covers the whole plane in every case.
    """
    shape = ref.plane_shape
    if ref.region is not None:
        region = as_box(ref.region)
        return place(segment_local(adapter, embed(ref), region, prompt, texts), shape)
    if tiling is not None and tiling.applies(shape, input_side(adapter)):
        return segment_tiled(adapter, embed, ref, prompt, tiling, texts)
    return segment_prompt(adapter, embed(ref), for_plane(prompt), texts)
