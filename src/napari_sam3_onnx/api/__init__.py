"""Headless Python API: SAM 3 through ONNX Runtime on arrays and files, no napari.

Everything works plane by plane, so numpy arrays, dask arrays, zarr arrays and files opened
with :func:`read_image` (TIFF, ``.npy``, zarr, OME-Zarr) are never loaded whole. Images are
``(..., rows, cols)`` (or ``(..., rows, cols, 3|4)`` with ``rgb=True``); ``axis`` names the
slice axis, which is moved to the front (the other axes keep their order); points and boxes are
``(row, col)`` in slice pixels.

Examples
--------
>>> from napari_sam3_onnx import api
>>> bundle = api.open_bundle("hf-tracker")            # or a folder of .onnx files
>>> stack = api.read_image("nuclei.tif")              # (z, rows, cols), read lazily
>>> api.precompute(bundle, stack, "nuclei.zarr", window=(500, 4000))   # encode once
>>> mask = api.segment(bundle, stack, [[40, 61]], index=(3,), window=(500, 4000),
...                    store="nuclei.zarr").mask     # (rows, cols) bool, no encoding

The encoder is the slow step (seconds per slice on a CPU); :func:`precompute` writes each
slice's embedding once into an
:class:`~napari_sam3_onnx.engine.store.embedding_store.EmbeddingStore`, and every other
function takes ``store=`` to read from it (and fill it). Pass ``client=`` (a
``dask.distributed.Client``) to :func:`precompute` to spread the slices over a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..engine.automatic import AutoMaskSettings
from ..engine.encoding import SliceRef
from ..engine.interactive import ObjectMask, Prompt
from ..engine.slices import extract_plane
from ..engine.store.embedding_store import EmbeddingStore, fingerprint
from ..engine.store.precompute import PrecomputeReport
from ..engine.store.precompute import precompute as _precompute_refs
from ..engine.store.verify import StoreCheck, verify_store
from ..engine.tiling.tiled import input_side, tile_refs
from ..engine.tiling.tiles import TileSettings, as_tiling
from ..models.base import Capability
from .automatic import AutoSegmentation, AutoStep, iter_segment_all, segment_all
from .bundles import Bundle, open_bundle
from .clicks import segment_object
from .evaluate import EvaluationReport, evaluate
from .exemplars import ExemplarSearch, search_like
from .io import InputError, image_names, parse_slices, planes_view, read_image
from .jobs import StackJob, claim_names
from .propagate import PropagationStep, Seed, iter_propagate, propagate
from .refine import refine
from .repropagate import repropagate
from .search import SearchStep, iter_search
from .text import TextResult, iter_search_text, search_text, table_columns
from .validate import check_box, check_points, check_window
from .workspace import Workspace

__all__ = [
    "AutoMaskSettings", "AutoSegmentation", "AutoStep", "Bundle", "EmbeddingStore",
    "EvaluationReport", "ExemplarSearch", "InputError", "PrecomputeReport", "Prompt",
    "PropagationStep", "SearchStep", "Seed", "StackJob", "StoreCheck", "TextResult",
    "TileSettings", "Workspace", "encode_stack", "evaluate", "iter_propagate", "iter_search",
    "iter_search_text", "iter_segment_all", "make_jobs", "open_bundle", "parse_slices",
    "precompute", "propagate", "read_image", "refine", "repropagate", "search_like",
    "search_text", "segment", "segment_all", "table_columns", "verify_store",
]

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
    bundle: Bundle,
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
    bundle : Bundle
        From :func:`open_bundle`.
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
    """
    tiling = as_tiling(tile)
    if client is not None and tiling is not None:  # checked before any store is opened
        raise ValueError("tiled precompute runs in this process; leave out client= or tile=")
    jobs = make_jobs(images, names, axis, rgb, window, slices)
    _refuse_store_over_inputs(store, jobs)
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


def encode_stack(
    bundle: Bundle, data, store: StoreLike, *, image: str = "image", **options
) -> PrecomputeReport:
    """:func:`precompute` for one image named ``image`` (same keyword options)."""
    return precompute(bundle, data, store, names=[image], **options)


def segment(
    bundle: Bundle,
    data,
    points_rc=None,
    labels=None,
    box_rc=None,
    *,
    index: Sequence[int] = (),
    axis: int = 0,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    store: StoreLike | None = None,
    image: str = "image",
    mask_logits: np.ndarray | None = None,
) -> ObjectMask:
    """Segment one object on one plane from clicks and/or a box.

    Parameters
    ----------
    bundle : Bundle
        A bundle with ``clicks`` (or ``boxes`` with ``text``: a box alone, via the detector).
    data : array-like
        A 2-D plane or a stack; the plane is ``data[index]`` after moving ``axis`` first.
    points_rc : array-like, optional
        ``(N, 2)`` clicks ``(row, col)`` in slice pixels.
    labels : array-like, optional
        ``(N,)`` 1 = positive (default), 0 = negative.
    box_rc : array-like, optional
        ``(4,)`` box ``(r0, c0, r1, c1)`` in slice pixels.
    index : sequence of int
        Plane index along the leading axes (``()`` for a 2-D image).
    axis, rgb, window
        As in :func:`precompute`.
    store : EmbeddingStore or path, optional
        Read the plane's embedding from (and write it to) this store.
    image : str
        The image's name in the store.
    mask_logits : numpy.ndarray, optional
        ``low_res_logits`` of a previous result for this object (refinement).

    Returns
    -------
    ObjectMask
        ``mask`` is ``(rows, cols)`` bool. Embeddings stay in ``bundle.cache`` (keyed by the
        plane's content), so more prompts on the same plane cost no encoding.
    """
    view = planes_view(data, axis, rgb)
    index = tuple(int(i) for i in index)
    try:
        plane = extract_plane(view, index, rgb)
    except (IndexError, ValueError) as exc:
        lead = tuple(view.shape[:view.ndim - (3 if rgb else 2)])
        raise InputError(f"index={index} does not name a plane of data whose leading axes are "
                         f"{lead} ({exc}).") from exc
    win = check_window(window)
    pts = np.zeros((0, 2)) if points_rc is None else points_rc
    check_points(pts, labels, plane.shape)
    check_box(box_rc, plane.shape)
    ref = SliceRef(view, index, rgb, win, source=image, data_version=fingerprint(plane))
    st = None if store is None else bundle.open_store(store)
    prompt = Prompt.clicks(pts, labels, box_rc, mask_logits)
    detector = not bundle.adapter.has(Capability.CLICKS) and bundle.adapter.has(Capability.TEXT)
    return segment_object(bundle.encoder(st, bundle.cache), ref, prompt,
                          bundle.texts if detector else None)

