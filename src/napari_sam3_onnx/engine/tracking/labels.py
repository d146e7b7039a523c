"""Slices along an axis in, one label stack out: what a headless propagation reads and writes.

:class:`LabelWriter` is the ``on_slice`` of :func:`~.propagation.propagate` that paints each
decoded slice into a label stack (the planes are named by
:func:`~napari_sam3_onnx.engine.encoding.refs_along_axis`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from napari_sam3_onnx.engine.postprocess import upsample_logits
from napari_sam3_onnx.engine.tracking.steps import SliceOutput


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
