"""Encode planes into an embedding store once (:func:`precompute`), locally or on a cluster.

:func:`make_jobs` turns images (arrays, paths, :class:`~.jobs.StackJob`) into jobs with their
store names; :func:`precompute` writes each selected plane's embedding (or each tile's) into an
:class:`~napari_sam3_onnx.engine.store.embedding_store.EmbeddingStore` that every workflow then
reads with ``store=``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from ..engine.store.embedding_store import EmbeddingStore
from ..engine.store.precompute import PrecomputeReport
from ..engine.store.precompute import precompute as _precompute_refs
from ..engine.tiling.tiled import input_side, tile_refs
from ..engine.tiling.tiles import TileSettings, as_tiling
from .bundles import Bundle, as_bundle
from .io import InputError, image_names
from .jobs import StackJob, claim_names

StoreLike = EmbeddingStore | Path | str


def make_jobs(
    images, names: Sequence[str] | None = None, axis: int = 0, rgb: bool = False,
    window: tuple[float, float] | None = None, slices: slice | None = None,
) -> list[StackJob]:
    """One :class:`StackJob` per image (an array or a path, or a list of them).

    A :class:`StackJob` in ``images`` is kept as it is (its own axis, window and slices).

    Paths are named in the store by :func:`~.io.image_names` (relative path, no suffix),
    arrays ``"image"`` (``"image0"``, ``"image1"``, ... for several) unless ``names`` says.
    """
    many = isinstance(images, (list, tuple))
    items = list(images) if many else [images]
    if names is None:
        paths = [Path(i) for i in items if isinstance(i, (str, Path))]
        by_path = dict(zip(paths, image_names(paths), strict=True))
        names = [by_path[Path(i)] if isinstance(i, (str, Path))
                 else getattr(i, "image", f"image{n}" if len(items) > 1 else "image")
                 for n, i in enumerate(items)]
    if len(names) != len(items):
        raise ValueError(f"{len(items)} images but {len(names)} names")
    return [i if isinstance(i, StackJob) else StackJob(i, str(n), axis, rgb, window, slices)
            for i, n in zip(items, names, strict=True)]


def precompute(
    model_or_folder: Bundle | Path | str,
    images,
    store: StoreLike,
    *,
    names: Sequence[str] | None = None,
    axis: int = 0,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    slices: slice | None = None,
    precision: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    client=None,
    tile: TileSettings | int | None = None,
    replace_store: bool = False,
) -> PrecomputeReport:
    """Encode every plane of one or more images into an embedding store, resumably.

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle (:func:`~.bundles.open_bundle`), a bundle folder or a registry id.
    images : array-like or path, or a list of them
        ``(..., rows, cols[, channels])`` arrays, or image files opened lazily.
    store : EmbeddingStore or path
        The zarr store to fill (created if missing).
    names : sequence of str, optional
        The images' names in the store (see :func:`make_jobs`).
    axis, rgb, window, slices
        Slice axis, colour data, contrast window (use the one you will view the data with) and
        the positions along the slice axis to encode (default all).
    precision : {"fp32", "fp16"}, optional
        Storage precision (default: the store's own, fp32 for a new store).
    progress : callable, optional
        ``progress(done, total)`` in planes.
    cancelled : callable, optional
        Checked before each plane (single process); True stops, finished entries stay.
    client : dask.distributed.Client, optional
        Spread the planes over the cluster's workers (see ``docs/cluster.md``).
    tile : TileSettings or int, optional
        Store large planes as tiles (an int: the tile side in pixels), one entry per tile, for
        ``search_text(..., tile=...)`` with the same value. Not with ``client``.
    replace_store : bool
        The store was made for another bundle or precision: empty it and fill it for this one
        (without it such a store is refused with a ``StoreMismatchError``).

    Returns
    -------
    PrecomputeReport
        Planes encoded now, planes skipped because their entry was complete and intact, and
        of the encoded ones those that replaced a half-written or corrupt entry.

    Examples
    --------
    >>> report = api.precompute("hf-tracker", "nuclei.tif", "nuclei.zarr", window=(500, 4000))
    >>> report.encoded, report.skipped, report.total        # planes; a rerun encodes none
    """
    tiling = as_tiling(tile)
    if client is not None and tiling is not None:  # checked before any store is opened
        raise ValueError("tiled precompute runs in this process; leave out client= or tile=")
    jobs = make_jobs(images, names, axis, rgb, window, slices)
    _refuse_store_over_inputs(store, jobs)
    bundle = as_bundle(model_or_folder)
    if client is not None:
        from .cluster import precompute_on_cluster

        st = bundle.open_store(store, precision, replace_store=replace_store)
        return precompute_on_cluster(client, bundle, claim_names(st, jobs), st, precision,
                                     progress)
    st = bundle.open_store(store, precision, replace_store=replace_store)
    encoder = bundle.encoder(st)
    refs = [ref for job in claim_names(st, jobs) for ref in job.refs()]
    if tiling is not None:
        refs = [t for r in refs for t in tile_refs(r, tiling, input_side(bundle.adapter))]
    return _precompute_refs(encoder, refs, progress, cancelled)  # type: ignore[arg-type]


def _refuse_store_over_inputs(store: StoreLike, jobs: Sequence[StackJob]) -> None:
    """An embedding store is never created on (or around) an image it is computed from."""
    if isinstance(store, EmbeddingStore):
        return
    where = Path(os.path.realpath(store))
    for job in jobs:
        if job.is_file:
            image = Path(os.path.realpath(str(job.data)))
            if where == image or where in image.parents:
                raise InputError(f"The store {store} would be written over the image "
                                 f"{job.data}: give the store a name of its own.")
