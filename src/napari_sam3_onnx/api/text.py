"""Text concept search over an image, slice by slice: labels and a table of instances."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..engine.cache import EmbeddingCache
from ..engine.concepts.search import DEFAULT_FLOOR, SliceResult, parse_concepts
from ..engine.store.embedding_store import EmbeddingStore
from ..engine.tiling.tiles import TileSettings, as_tiling
from ..models.base import Capability
from . import instance_table
from .bundles import Bundle, as_bundle
from .jobs import StackJob
from .search import check_search, iter_search

#: Table columns before the ``index_<k>`` columns (one per leading axis of the image).
INSTANCE_COLUMNS = instance_table.HEAD["text"]
BOX_COLUMNS = instance_table.BOX_COLUMNS


def table_columns(n_lead: int) -> list[str]:
    """Table columns for an image with ``n_lead`` leading axes (0 for a 2-D image).

    The instance table's schema (:mod:`~napari_sam3_onnx.api.instance_table`, kind ``"text"``):
    ``label``, ``concept``, ``score``, ``area_px``, ``index_<k>``, the bounding box.
    """
    return instance_table.columns("text", n_lead)


def table_rows(result: SliceResult) -> list[dict]:
    """One row per instance of a slice result, keyed by :func:`table_columns`."""
    return instance_table.rows(result.instances, "text")


@dataclass
class TextResult:
    """Labels and instances of a text search.

    Attributes
    ----------
    labels : array-like
        ``(n, [m,] rows, cols)`` int32 (the image's shape with the slice axis first, no channel
        axis); 0 = background, zeros on slices that were not searched.
    rows : list of dict
        One row per instance (see :func:`table_columns`).
    searched : int
        Slices searched (fewer than asked when cancelled).
    """

    labels: object
    rows: list[dict] = field(default_factory=list)
    searched: int = 0


def _phrases(concepts: str | Sequence[str]) -> list[str]:
    if isinstance(concepts, str):
        return parse_concepts(concepts)
    return parse_concepts(",".join(concepts))


def iter_search_text(
    bundle: Bundle,
    data,
    concepts: str | Sequence[str],
    *,
    floor: float = DEFAULT_FLOOR,
    axis: int = 0,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    slices: slice | None = None,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    min_area: int = 0,
    fill_holes: bool = False,
    first_id: int = 1,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    tile: TileSettings | int | None = None,
    link_iou: float | None = None,
) -> Iterator[tuple[tuple[int, ...], SliceResult]]:
    """Search slice after slice, yielding ``(index, SliceResult)`` as each one finishes.

    Ids are unique over the whole run. Only one slice's data, embedding (one tile's, when
    tiled) and labels are in memory at a time. The language encoder runs once per phrase
    (cached in ``bundle.texts``). A thin call of :func:`~.search.iter_search`; see
    :func:`search_text` for the parameters.
    """
    phrases = _phrases(concepts)
    check_search(floor, min_area)
    bundle.adapter.require(Capability.TEXT)
    job = StackJob(data, image, axis, rgb, window, slices)
    view = job.view()
    refs = job.refs(view)
    workspace = bundle.workspace(store, EmbeddingCache(budget_bytes=0), as_tiling(tile))
    for step in iter_search(workspace, refs, phrases, floor=floor, min_area=min_area,
                            fill_holes=fill_holes, first_id=first_id, link_iou=link_iou,
                            cancelled=cancelled):
        if progress is not None:
            progress(step.done, step.total)
        yield step.index, step.result


def search_text(
    model_or_folder: Bundle | Path | str,
    data,
    concepts: str | Sequence[str],
    *,
    floor: float = DEFAULT_FLOOR,
    axis: int = 0,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    slices: slice | None = None,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    min_area: int = 0,
    fill_holes: bool = False,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out=None,
    tile: TileSettings | int | None = None,
    link_iou: float | None = None,
) -> TextResult:
    """Find every instance of each concept on every (selected) slice of an image.

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id.
        A bundle with the ``text`` capability and a tokenizer file in its folder.
    data : array-like or path
        ``(..., rows, cols[, channels])`` image.
    concepts : str or sequence of str
        ``"nucleus, cell"`` or ``["nucleus", "cell"]``; each phrase is its own class.
    floor : float
        Keep instances scoring above it (SAM 3 uses 0.5).
    axis, rgb, window, slices
        Slice axis, colour data, contrast window and positions along the slice axis.
    store : EmbeddingStore or path, optional
        Read embeddings from (and add new ones to) this store.
    image : str
        The image's name in the store.
    min_area : int
        Drop instances with fewer pixels.
    fill_holes : bool
        Fill holes inside instances.
    progress, cancelled : callable, optional
        ``progress(done, total)``; ``cancelled()`` True stops after the current slice.
    out : array-like, optional
        Where to write the labels (e.g. a zarr array), shaped like
        :attr:`TextResult.labels`; default a new int32 numpy array.
    tile : TileSettings or int, optional
        Search large planes tile by tile (an int: the tile side in pixels; planes longer than
        one tile are tiled). Instances cut by tile edges or found twice in overlaps are merged
        (:mod:`~napari_sam3_onnx.engine.tiling.tiled_search`); see ``docs/large-images.md``.
    link_iou : float, optional
        Give an instance the id of the previous slice's instance it overlaps with IoU above
        this (e.g. 0.3, :data:`~napari_sam3_onnx.engine.automatic.linking.LINK_IOU`), so "every
        nucleus in this stack" gives one id per nucleus through z; None: new ids per slice.

    Returns
    -------
    TextResult
        Labels, one table row per instance, and the number of slices searched.

    Examples
    --------
    >>> res = api.search_text("wkentaro-sam3", "nuclei.tif", "nucleus, mitosis",
    ...                       window=(500, 4000))
    >>> res.labels.shape, len(res.rows)                         # (z, rows, cols) int32, table
    """
    bundle = as_bundle(model_or_folder)
    view = StackJob(data, image, axis, rgb).view()
    shape = tuple(view.shape[:-1] if rgb else view.shape)
    labels = np.zeros(shape, np.int32) if out is None else out
    result = TextResult(labels)
    for index, res in iter_search_text(
        bundle, data, concepts, floor=floor, axis=axis, rgb=rgb, window=window, slices=slices,
        store=store, image=image, min_area=min_area, fill_holes=fill_holes, progress=progress,
        cancelled=cancelled, tile=tile, link_iou=link_iou,
    ):
        labels[index] = res.labels
        result.rows.extend(table_rows(res))
        result.searched += 1
    return result
