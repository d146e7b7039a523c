"""Slices along an axis in, one label stack out: what a headless propagation reads and writes.

:func:`refs_along_axis` names the planes of a stack for :func:`~.propagation.propagate`;
:class:`LabelWriter` is its ``on_slice`` that paints each decoded slice into a label stack.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.postprocess import upsample_logits
from napari_sam3_onnx.engine.tracking.propagation import STACK_NEEDED
from napari_sam3_onnx.engine.tracking.steps import SliceOutput
from napari_sam3_onnx.models.errors import PromptError


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
