"""Headless propagation over an array: seeds in, a label stack out (for the CLI and scripts)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np

from ..models.base import SamAdapter
from ..models.errors import PromptError
from .cache import EmbeddingCache
from .encoding import SliceEncoder, SliceRef
from .postprocess import upsample_logits
from .propagation import STACK_NEEDED, propagate
from .propagation_types import Direction, PropagationResult, Seed
from .track_steps import SliceOutput


def refs_along_axis(
    data, axis: int = 0, fixed: Sequence[int] = (), rgb: bool = False,
    window: tuple[float, float] | None = None, source: Hashable = None,
) -> list[SliceRef]:
    """One :class:`SliceRef` per position along a leading axis of ``data``.

    Parameters
    ----------
    data : array-like
        ``(..., rows, cols[, channels])`` image data.
    axis : int
        The leading axis to propagate along (0 for ``(Z, rows, cols)``).
    fixed : sequence of int
        Indices of the other leading axes, in order (e.g. the time point of a
        ``(T, Z, rows, cols)`` stack when propagating along z: ``axis=1, fixed=(t,)``).
    rgb, window, source
        As in :class:`SliceRef`.

    Raises
    ------
    PromptError
        ``data`` has no leading axis (a 2-D image), or ``axis`` / ``fixed`` do not fit.
    """
    lead = data.ndim - (3 if rgb else 2)
    if lead < 1:
        raise PromptError(STACK_NEEDED)
    if not 0 <= axis < lead or len(fixed) != lead - 1:
        raise PromptError(f"Data of shape {tuple(data.shape)} has {lead} leading axes: choose "
                          f"axis in 0..{lead - 1} and give {lead - 1} fixed indices.")
    source = source if source is not None else id(data)
    refs = []
    for z in range(data.shape[axis]):
        index = [int(i) for i in fixed]
        index.insert(axis, z)
        refs.append(SliceRef(data, tuple(index), rgb, window, source))
    return refs


class LabelWriter:
    """Writes slice outputs into a ``(Z, rows, cols)`` int32 label stack.

    Within one call, a pixel claimed by several objects goes to the highest (upsampled) logit;
    pixels already labelled by an earlier call are never overwritten (seed slices are written
    first, so a user's prompt wins on its own slice).
    """

    def __init__(self, labels: np.ndarray) -> None:
        self.labels = labels

    def __call__(self, index: int, outputs: Mapping[int, SliceOutput]) -> None:  # noqa: D102
        plane = self.labels[index]
        items = [(oid, o) for oid, o in outputs.items() if o.mask.any()]
        if not items:
            return
        if len(items) == 1:  # nothing to arbitrate: write the free pixels
            oid, out = items[0]
            plane[out.mask & (plane == 0)] = oid
            return
        masks = np.stack([o.mask for _, o in items])
        owner = np.argmax(masks, axis=0)
        contested = masks.sum(axis=0) > 1
        if contested.any():
            logits = np.stack([upsample_logits(o.low_res_logits, plane.shape) for _, o in items])
            logits[~masks] = -np.inf
            owner = np.where(contested, np.argmax(logits, axis=0), owner)
        ids = np.array([oid for oid, _ in items], np.int32)
        free = masks.any(axis=0) & (plane == 0)
        plane[free] = ids[owner[free]]


def propagate_stack(
    adapter: SamAdapter,
    stack: np.ndarray,
    seeds: Mapping[int, Seed | Sequence[Seed]],
    axis: int = 0,
    *,
    fixed: Sequence[int] = (),
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    direction: Direction = "both",
    index_range: tuple[int, int] | None = None,
    stop_after_absent: int | None = 2,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    cache: EmbeddingCache | None = None,
    return_result: bool = False,
) -> np.ndarray | tuple[np.ndarray, PropagationResult]:
    """Propagate objects through an array and return their labels.

    Parameters
    ----------
    adapter : SamAdapter
        An opened bundle (memory graphs used if present, else prompt carry-over).
    stack : numpy.ndarray
        ``(..., rows, cols[, channels])`` data with at least one leading axis.
    seeds : mapping object id -> Seed or sequence of Seed
        Object ids (> 0, they become the label values) and their seed slices, indexed along
        ``axis``.
    axis, fixed, rgb, window
        See :func:`refs_along_axis`.
    direction, index_range, stop_after_absent, progress, cancelled
        See :func:`~napari_sam3_onnx.engine.propagation.propagate`.
    cache : EmbeddingCache, optional
        Reuse embeddings across calls (e.g. a correction re-run).
    return_result : bool
        Also return the :class:`PropagationResult` (stop reasons, bank counters; its per-slice
        outputs are not kept, the labels hold them).

    Returns
    -------
    numpy.ndarray
        ``(n, rows, cols)`` int32 labels along ``axis`` (0 = background); or
        ``(labels, result)`` with ``return_result``.
    """
    if any(int(oid) <= 0 for oid in seeds):
        raise PromptError("Object ids must be positive integers (they become label values).")
    refs = refs_along_axis(stack, axis, fixed, rgb, window)
    if len(refs) < 2:
        raise PromptError(STACK_NEEDED)
    labels = np.zeros((len(refs), *refs[0].plane_shape), np.int32)
    encoder = SliceEncoder(adapter, cache)
    result = propagate(adapter, encoder, refs, seeds, direction, index_range,
                       stop_after_absent, progress, cancelled, on_slice=LabelWriter(labels),
                       keep_outputs=False)
    return (labels, result) if return_result else labels
