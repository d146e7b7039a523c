"""Re-propagate label ids that are already in a labels stack, from one slice (API and CLI).

The seeds are the ids' masks on slice ``z`` (:func:`~.propagation_seeds.label_seeds`), carried
by the one propagation workflow (:func:`~.propagate.iter_propagate`). The result is a copy of
the labels in which only those ids change, and only on the slices the run reaches: there, an
id's old pixels give way to its propagated ones (written on background or the id's own pixels,
never over another id); slices the run does not reach (before the seed for
``direction="forward"``, after an object stopped) keep what they had. The Propagate tab does the
same into a Labels layer (:class:`~napari_sam3_onnx._napari.propagate.writer.RunWriter` with
``replace``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..engine.cache import EmbeddingCache
from ..engine.encoding import refs_along_axis
from ..engine.tracking.labels import LabelWriter
from ..engine.tracking.propagation import STACK_NEEDED, drive
from ..engine.tracking.steps import SliceOutput
from ..engine.tracking.types import Direction, PropagationResult
from ..models.errors import PromptError
from .bundles import Bundle, as_bundle
from .io import InputError, planes_view
from .propagate import iter_propagate
from .propagation_seeds import label_seeds
from .validate import check_window

__all__ = ["ReplacingWriter", "repropagate"]


class ReplacingWriter:
    """Writes slice outputs into a labels stack, replacing each object's earlier pixels.

    On a slice where object ``oid`` has an output (present or not), its old pixels become
    background; then the slice is written by :class:`LabelWriter`'s rule (only free pixels,
    a contested pixel to the highest logit). Other ids are never written over.
    """

    def __init__(self, labels: np.ndarray) -> None:
        self.labels = labels
        self._write = LabelWriter(labels)
        self.reached: dict[int, set[int]] = {}

    def __call__(self, index: int, outputs: Mapping[int, SliceOutput]) -> None:  # noqa: D102
        plane = self.labels[index]
        for oid in outputs:
            plane[plane == oid] = 0
            self.reached.setdefault(int(oid), set()).add(int(index))
        self._write(index, outputs)


def repropagate(
    model_or_folder: Bundle | Path | str,
    data,
    labels,
    z: int,
    ids: Sequence[int] | None = None,
    *,
    direction: Direction = "both",
    index_range: tuple[int, int] | None = None,
    stop_after_absent: int | None = 2,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    store=None,
    image: str = "image",
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out=None,
) -> tuple[np.ndarray, PropagationResult]:
    """Carry label ids of ``labels`` from slice ``z`` through the stack; only they change.

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id.
        A bundle with ``clicks`` (``memory``: SAM 3's video memory; otherwise carry-over).
    data : array-like
        ``(n, rows, cols[, channels])`` image stack (slices along axis 0).
    labels : array-like
        ``(n, rows, cols)`` integer labels of the same stack (not changed).
    z : int
        The slice the ids are taken from (their seeds).
    ids : sequence of int, optional
        Label ids on slice ``z`` (None: every id on it).
    direction, index_range, stop_after_absent, rgb, window, store, image, progress, cancelled
        As in :func:`~.propagate.propagate`.
    out : array-like, optional
        Where to write the result, shaped and typed like ``labels`` (e.g. a ``.npy`` memmap:
        ``labels`` is then copied in plane by plane, never held whole); default a new array.

    Returns
    -------
    labels : numpy.ndarray
        ``(n, rows, cols)`` a copy of ``labels`` (its dtype) with only ``ids`` replaced on the
        slices the run reached.
    result : PropagationResult
        How each object's passes ended.

    Raises
    ------
    PromptError
        A 2-D image, an id not on slice ``z``, no label there, or bad options.
    InputError
        ``labels`` does not have the image's shape.

    Examples
    --------
    >>> fixed, run = api.repropagate(bundle, stack, labels, z=12, ids=[3, 7])
    >>> fixed.shape == labels.shape                             # only ids 3 and 7 changed
    """
    bundle = as_bundle(model_or_folder)
    view = planes_view(data, 0, rgb)
    if view.ndim - (3 if rgb else 2) != 1:
        raise PromptError(STACK_NEEDED + " (re-propagation takes one 3-D stack)")
    shape = tuple(view.shape[:3])
    if not hasattr(labels, "shape") or not hasattr(labels, "dtype"):
        labels = np.asarray(labels)
    if tuple(labels.shape) != shape or not np.issubdtype(labels.dtype, np.integer):
        raise InputError(f"The labels have shape {tuple(labels.shape)} and dtype "
                         f"{labels.dtype}; the image needs integer labels of shape {shape}.")
    if out is None:
        out = np.array(labels, copy=True)
    elif tuple(out.shape) != shape or out.dtype != labels.dtype:
        raise InputError(f"out= has shape {tuple(out.shape)} and dtype {out.dtype}; the "
                         f"labels are {shape} {labels.dtype}.")
    else:
        for k in range(shape[0]):
            out[k] = np.asarray(labels[k])
    if not 0 <= int(z) < shape[0]:
        raise PromptError(f"Slice {z} is outside the stack (0 to {shape[0] - 1}).")
    seeds = label_seeds(out[int(z)], int(z), ids)
    refs = refs_along_axis(view, 0, (), rgb, check_window(window), source=image)
    workspace = bundle.workspace(store, EmbeddingCache())
    steps = iter_propagate(workspace, refs, seeds, direction=direction, index_range=index_range,
                           stop_after_absent=stop_after_absent, cancelled=cancelled)
    result = drive(steps, ReplacingWriter(out), progress)
    return out, result
