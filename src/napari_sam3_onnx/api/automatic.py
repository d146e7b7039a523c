"""Automatic instance segmentation of an image, plane by plane, with 3-D linking through stacks.

:func:`iter_segment_all` (over a :class:`~.workspace.Workspace` and slice references, as every
workflow) is the one orchestration path: the API's :func:`segment_all` and the CLI's
``segment-all`` consume it, and the dock's Automatic tab its loop :func:`iter_segment_refs`. It
yields one :class:`AutoStep` per plane, as each finishes, and stops between planes (and between
decoder batches) when the cancel token says so; embeddings come from (and go to) the embedding
store when one is given, so a cancelled or interrupted run resumes without encoding again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from ..engine.automatic import AutoMaskSettings, AutoResult, segment_plane
from ..engine.automatic.linking import LINK_IOU, PlaneLinker, relabel
from ..engine.cache import EmbeddingCache
from ..engine.encoding import SliceRef
from ..engine.store.embedding_store import EmbeddingStore
from ..engine.tiling.tiled import input_side
from ..engine.tiling.tiles import TileSettings, as_tiling
from ..models.base import Capability, Embedding, SamAdapter
from . import instance_table
from .bundles import Bundle, as_bundle
from .io import InputError
from .jobs import StackJob
from .workspace import Workspace

#: Table columns before the ``index_<k>`` columns.
AUTO_COLUMNS = instance_table.HEAD["automatic"]
BOX_COLUMNS = instance_table.BOX_COLUMNS


def auto_table_columns(n_lead: int) -> list[str]:
    """Columns of :func:`auto_table_rows` for an image with ``n_lead`` leading axes.

    The instance table's schema (:mod:`~napari_sam3_onnx.api.instance_table`, kind
    ``"automatic"``): ``score`` is the decoder's predicted IoU, ``stability`` SAM's stability
    score, ``area_px`` the object's pixels on that plane; a 3-D object has one row per plane.
    """
    return instance_table.columns("automatic", n_lead)


def auto_table_rows(result: AutoResult) -> list[dict]:
    """One row per object of a plane."""
    return instance_table.rows(result.instances, "automatic")


def link_result(linker: PlaneLinker, labels: np.ndarray, instances, index) -> np.ndarray:
    """Relabel one plane's labels and instances (``.id``) with the linker's stack ids."""
    mapping = linker.link(labels, tuple(index))
    for inst in instances:
        inst.id = mapping.get(inst.id, inst.id)
    return relabel(labels, mapping)


def tiles_per_plane(adapter: SamAdapter, plane_shape: Sequence[int],
                    tiling: TileSettings | None) -> int:
    """How many tiles :func:`iter_segment_refs` encodes a ``(rows, cols)`` plane in (1: whole).

    Planes whose long side does not exceed the tiling threshold are encoded whole even with
    tiling on: the rule :func:`~..engine.automatic.segment_plane` follows
    (:meth:`TileSettings.grid <..engine.tiling.tiles.TileSettings.grid>`).
    """
    if tiling is None:
        return 1
    return len(tiling.grid(plane_shape, input_side(adapter))) or 1


@dataclass
class AutoStep:
    """One finished plane of a run.

    Attributes
    ----------
    index : tuple[int, ...]
        The plane's leading indices (slice axis first).
    result : AutoResult
        Its labels and objects (ids already linked through the stack when linking is on).
    done, total : int
        Planes finished so far, and planes asked for.
    tiles : int
        Tiles the plane was encoded and segmented in (1: the whole plane, untiled).
    """

    index: tuple[int, ...]
    result: AutoResult
    done: int
    total: int
    tiles: int = 1


def iter_segment_refs(
    adapter: SamAdapter,
    embed: Callable[[SliceRef], Embedding],
    refs: Sequence[SliceRef],
    settings: AutoMaskSettings | None = None,
    link_iou: float | None = LINK_IOU,
    first_id: int = 1,
    tiling: TileSettings | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[AutoStep]:
    """The loop every caller shares: segment each plane of ``refs``, link, yield.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``clicks`` capability.
    embed : callable
        ``ref -> Embedding`` (a store-backed or cached :class:`~..engine.encoding.SliceEncoder`'s
        ``embed``; the dock passes one that holds its encode locks).
    refs : sequence of SliceRef
        The planes, in order (consecutive planes of a stack are linked).
    settings, link_iou, first_id, tiling
        As in :func:`segment_all` (``tiling`` already parsed; planes not longer than its
        threshold are segmented whole, see :func:`tiles_per_plane`).
    cancelled : callable, optional
        Cancel token, checked between planes and decoder batches; a plane cut short is not
        yielded.
    """
    if not adapter.has(Capability.CLICKS):
        adapter.require(Capability.CLICKS)
    linker = None if link_iou is None else PlaneLinker(link_iou, first_id)
    next_id = int(first_id)
    for n, ref in enumerate(refs):
        if cancelled is not None and cancelled():
            return
        index = tuple(ref.index)
        res = segment_plane(adapter, embed, ref, settings, tiling, next_id, index,
                            cancelled=cancelled)
        if cancelled is not None and cancelled():
            return
        if linker is not None:
            res.labels = link_result(linker, res.labels, res.instances, index)
        else:
            next_id += len(res.instances)
        yield AutoStep(index, res, n + 1, len(refs),
                       tiles_per_plane(adapter, ref.plane_shape, tiling))


def iter_segment_all(
    workspace: Workspace,
    refs: Sequence[SliceRef],
    *,
    settings: AutoMaskSettings | None = None,
    link_iou: float | None = LINK_IOU,
    first_id: int = 1,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[AutoStep]:
    """Segment every object on each plane of ``refs``; yield each plane as it finishes.

    Parameters
    ----------
    workspace : Workspace
        A model with ``clicks``; its encoder (store-backed when a store is attached: a resumed
        run encodes nothing twice) and tiling (large planes covered tile by tile).
    refs : sequence of SliceRef
        The planes, in order (consecutive planes of a stack are linked).
    settings, link_iou, first_id
        As in :func:`segment_all`.
    cancelled : callable, optional
        Cancel token, checked between planes and decoder batches.

    Yields
    ------
    AutoStep
        ``result.labels`` ``(rows, cols)`` int32 and the plane's objects.

    Examples
    --------
    >>> ws = bundle.workspace("nuclei.zarr")                     # bundle = api.open_bundle(...)
    >>> for step in api.iter_segment_all(ws, api.refs_along_axis(stack, window=(0, 3000))):
    ...     out[step.index] = step.result.labels                 # one plane at a time
    """
    encoder = workspace.encoder
    if encoder is None:
        raise InputError("Load a model first: automatic segmentation needs a bundle.")
    embed = partial(encoder.embed, need=Capability.ENCODE)  # the automatic workflow's encoder
    yield from iter_segment_refs(encoder.adapter, embed, refs, settings, link_iou,
                                 first_id, workspace.tiling, cancelled)


def _workspace_refs(bundle: Bundle, data, axis: int, rgb: bool,
                    window: tuple[float, float] | None, slices: slice | None,
                    store, image: str, tile: TileSettings | int | None):
    """The workspace (no memory cache: each plane is read once) and the selected planes."""
    job = StackJob(data, image, axis, rgb, window, slices)
    view = job.view()
    workspace = bundle.workspace(store, EmbeddingCache(budget_bytes=0), as_tiling(tile))
    return workspace, view, job.refs(view)


@dataclass
class AutoSegmentation:
    """Labels and objects of an automatic segmentation.

    Attributes
    ----------
    labels : array-like
        ``(n, [m,] rows, cols)`` int32 (the image's shape, slice axis first, no channel axis);
        zeros on planes that were not segmented.
    rows : list of dict
        One row per object and plane (see :func:`auto_table_columns`).
    done : int
        Planes segmented (fewer than asked when cancelled).
    """

    labels: object
    rows: list[dict] = field(default_factory=list)
    done: int = 0


def segment_all(
    model_or_folder: Bundle | Path | str,
    data,
    *,
    settings: AutoMaskSettings | None = None,
    axis: int = 0,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    slices: slice | None = None,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    link_iou: float | None = LINK_IOU,
    tile: TileSettings | int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out=None,
) -> AutoSegmentation:
    """Automatic ("segment everything") instance segmentation of an image or a stack.

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id, with the ``clicks`` capability.
    data : array-like or path
        ``(..., rows, cols[, channels])`` image.
    settings : AutoMaskSettings, optional
        Grid and filters, named as SAM's automatic mask generator names them (default: SAM's
        defaults, 32 x 32 clicks).
    axis, rgb, window, slices
        Slice axis, colour data, contrast window and positions along the slice axis.
    store : EmbeddingStore or path, optional
        Read embeddings from (and add new ones to) this store: a second run, or one resumed
        after a cancel, encodes nothing it already encoded.
    image : str
        The image's name in the store.
    link_iou : float or None
        Link each plane's objects to the previous plane's when their IoU exceeds this, so an
        object keeps one id through z (:mod:`~..engine.automatic.linking`); None: fresh ids on
        every plane.
    tile : TileSettings or int, optional
        Cover large planes tile by tile (an int: the tile side in pixels); objects found twice
        in overlaps or cut by tile edges are joined as text search joins them.
    progress : callable, optional
        ``progress(done, total)`` in planes.
    cancelled : callable, optional
        A cancel token: ``cancelled()`` True stops; finished planes are kept.
    out : array-like, optional
        Where to write the labels (e.g. a zarr array) shaped like
        :attr:`AutoSegmentation.labels`; default a new int32 numpy array.

    Returns
    -------
    AutoSegmentation
        Labels, one table row per object and plane, and the planes done.

    Examples
    --------
    >>> seg = api.segment_all("hf-tracker", api.read_image("nuclei.tif"), window=(500, 4000))
    >>> seg.labels.shape, seg.labels.dtype                 # ((z, rows, cols), int32)
    """
    bundle = as_bundle(model_or_folder)
    bundle.adapter.require(Capability.CLICKS)
    workspace, view, refs = _workspace_refs(bundle, data, axis, rgb, window, slices, store,
                                            image, tile)
    shape = tuple(view.shape[:-1] if rgb else view.shape)
    labels = np.zeros(shape, np.int32) if out is None else out
    result = AutoSegmentation(labels)
    for step in iter_segment_all(workspace, refs, settings=settings, link_iou=link_iou,
                                 cancelled=cancelled):
        labels[step.index] = step.result.labels
        result.rows.extend(auto_table_rows(step.result))
        result.done = step.done
        if progress is not None:
            progress(step.done, step.total)
    return result
