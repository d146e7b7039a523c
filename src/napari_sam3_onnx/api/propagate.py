"""Propagate objects through a stack: the one workflow the API, the CLI and the dock share.

:func:`iter_propagate` is the propagation workflow over a
:class:`~napari_sam3_onnx.api.workspace.Workspace`: seeds are checked before any work, then
each slice is yielded as the passes reach it (memory tracking or prompt carry-over, whichever
the bundle has), with progress and a cancel token; its return value is the
:class:`PropagationResult`. :func:`propagate` (the API and the CLI's ``propagate``) writes the
slices into a labels array; the dock's Propagate tab writes them into the user's Labels layer.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..engine.cache import EmbeddingCache
from ..engine.encoding import SliceRef, refs_along_axis
from ..engine.store.embedding_store import EmbeddingStore
from ..engine.tracking.labels import LabelWriter
from ..engine.tracking.propagation import STACK_NEEDED, PropagationStep, drive
from ..engine.tracking.propagation import iter_propagate as _iter_propagate
from ..engine.tracking.types import Direction, PropagationResult, Seed
from ..models.base import Capability
from ..models.errors import PromptError
from .bundles import Bundle, as_bundle
from .io import planes_view
from .validate import check_object_id, check_seeds, check_window
from .workspace import Workspace

__all__ = ["PropagationStep", "Seed", "iter_propagate", "propagate"]


def iter_propagate(
    workspace: Workspace,
    refs: Sequence[SliceRef],
    seeds: Mapping[int, Seed | Sequence[Seed]],
    *,
    direction: Direction = "both",
    index_range: tuple[int, int] | None = None,
    stop_after_absent: int | None = 2,
    cancelled: Callable[[], bool] | None = None,
) -> Generator[PropagationStep, None, PropagationResult]:
    """Carry objects from their seed slices through ``refs``; yield each slice as it comes.

    Parameters
    ----------
    workspace : Workspace
        A model with ``clicks`` (with ``memory`` it tracks with SAM 3's video memory,
        otherwise each slice is prompted from the previous one) and its encoder: slices other
        tabs or a store already encoded are not encoded again.
    refs : sequence of SliceRef
        The slices along the propagation axis, in order (at least two).
    seeds, direction, index_range, stop_after_absent
        As in :func:`propagate` (``z`` of a seed is its position in ``refs``).
    cancelled : callable, optional
        Cancel token, checked before each slice; the run then ends with what is done.

    Yields
    ------
    PropagationStep
        The seed slices first, then each slice a pass walks (``outputs`` per object id).

    Returns
    -------
    PropagationResult
        How each object's passes ended, the method used and the run's encoder calls.

    Raises
    ------
    PromptError
        Fewer than two slices, bad seeds, object ids, range or ``stop_after_absent``.

    Examples
    --------
    >>> ws = bundle.workspace("nuclei.zarr")
    >>> refs = api.refs_along_axis(stack, window=(500, 4000))   # stack: (z, rows, cols)
    >>> for step in api.iter_propagate(ws, refs, {1: api.Seed.clicks(4, [[40, 61]])}):
    ...     print(step.index, sorted(step.outputs))              # slice, object ids on it
    """
    encoder = workspace.encoder
    if encoder is None or workspace.adapter is None:
        raise PromptError("Load a model first: propagation needs a bundle with clicks.")
    workspace.adapter.require(Capability.CLICKS)
    for oid in seeds:
        check_object_id(oid)
    if len(refs) < 2:
        raise PromptError(STACK_NEEDED)
    check_stop_after(stop_after_absent)
    if index_range is not None:
        lo, hi = (int(v) for v in index_range)
        if not 0 <= lo < hi <= len(refs):
            raise PromptError(f"index_range ({lo}, {hi}) is not a non-empty range inside the "
                              f"stack's {len(refs)} slices (0 to {len(refs)}).")
    check_seeds(seeds, len(refs), refs[0].plane_shape, index_range)
    return (yield from _iter_propagate(workspace.adapter, encoder, list(refs), seeds,
                                       direction, index_range, stop_after_absent, cancelled,
                                       keep_outputs=False))


def check_stop_after(stop_after_absent: int | None) -> None:
    """Refuse a ``stop_after_absent`` below 1 (None: never stop) before any work starts."""
    if stop_after_absent is not None and int(stop_after_absent) < 1:
        raise PromptError(f"stop_after_absent={stop_after_absent}: give 1 or more slices "
                          "(or None to never stop).")


def propagate(
    model_or_folder: Bundle | Path | str,
    data,
    seeds: Mapping[int, Seed | Sequence[Seed]],
    *,
    axis: int = 0,
    fixed: Sequence[int] = (),
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    direction: Direction = "both",
    index_range: tuple[int, int] | None = None,
    stop_after_absent: int | None = 2,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out=None,
) -> tuple[np.ndarray, PropagationResult]:
    """Carry objects from their seed slices through the stack along ``axis``.

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id.
        A bundle with ``clicks``; with ``memory`` it tracks with SAM 3's video memory,
        otherwise each slice is prompted from the previous one (carry-over).
    data : array-like
        ``(n, [m,] rows, cols[, channels])`` after moving ``axis`` first.
    seeds : mapping object id -> Seed or sequence of Seed
        Object ids (> 0, they become label values) and where each is given:
        ``Seed.clicks(z, [[row, col]])``, ``Seed.clicks(z, [], box_rc=(r0, c0, r1, c1))`` or
        ``Seed.from_mask(z, mask)``; ``z`` is the position along ``axis``.
    axis : int
        The axis to propagate along (moved to the front).
    fixed : sequence of int
        For 4-D data: the index of the other leading axis (e.g. the time point).
    rgb, window
        Colour data; contrast window.
    direction : {"both", "forward", "backward"}
        Passes to run.
    index_range : (int, int), optional
        Half-open range of slices to visit.
    stop_after_absent : int or None
        Stop an object after this many slices without it.
    store : EmbeddingStore or path, optional
        Read embeddings from (and add new ones to) this store; the slices' store indices are
        ``(z, *fixed)``, as :func:`~napari_sam3_onnx.api.precompute` writes them.
    image : str
        The image's name in the store.
    progress, cancelled : callable, optional
        ``progress(done, total)``; ``cancelled()`` True ends the run with what is done.
    out : array-like, optional
        Where to write the labels: ``(n, rows, cols)`` int32, all zeros (e.g. a ``.npy``
        memmap, so a stack larger than memory is never held whole); default a new numpy array.

    Returns
    -------
    labels : array-like
        ``(n, rows, cols)`` int32 (0 = background, otherwise the object id): ``out`` when given.
    result : PropagationResult
        How each object's passes ended, the method used and the encoder calls.

    Raises
    ------
    PromptError
        A 2-D image, bad seeds or object ids.

    Examples
    --------
    >>> seeds = {1: api.Seed.clicks(4, [[40, 61]]), 2: api.Seed.from_mask(9, mask)}
    >>> labels, run = api.propagate("hf-tracker", stack, seeds, window=(500, 4000))
    >>> labels.shape == stack.shape, labels.dtype, run.method      # (z, rows, cols) int32
    """
    bundle = as_bundle(model_or_folder)
    view = planes_view(data, axis, rgb)
    if view.ndim - (3 if rgb else 2) < 1:
        raise PromptError(STACK_NEEDED)
    win = check_window(window)
    _check_fixed(view, fixed, rgb)
    refs = refs_along_axis(view, 0, fixed, rgb, win, source=image)
    if len(refs) < 2:
        raise PromptError(STACK_NEEDED)
    shape = (len(refs), *refs[0].plane_shape)
    labels = np.zeros(shape, np.int32) if out is None else out
    if tuple(labels.shape) != shape:
        raise PromptError(f"out= has shape {tuple(labels.shape)}; the labels are {shape}.")
    workspace = bundle.workspace(store, EmbeddingCache())
    steps = iter_propagate(workspace, refs, seeds, direction=direction,
                           index_range=index_range, stop_after_absent=stop_after_absent,
                           cancelled=cancelled)
    result = drive(steps, LabelWriter(labels), progress)
    return labels, result


def _check_fixed(view, fixed: Sequence[int], rgb: bool) -> None:
    """``fixed`` indexes the leading axes after the first (4-D data), each in range."""
    lead = tuple(view.shape[1:view.ndim - (3 if rgb else 2)])
    fixed = tuple(fixed)
    if len(fixed) != len(lead):
        raise PromptError(f"Data with leading axes {tuple(view.shape[:len(lead) + 1])} needs "
                          f"{len(lead)} fixed index(es) for the other axes (--fixed), got "
                          f"{len(fixed)}.")
    for k, (i, n) in enumerate(zip(fixed, lead, strict=True)):
        if not 0 <= int(i) < n:
            raise PromptError(f"Fixed index {i} is outside axis {k + 1} of the data "
                              f"(0 to {n - 1}).")
