"""An existing label as a SAM prompt, and the rule for writing its refined mask back.

A label a microscopist already has (Cellpose, StarDist, an automatic run, a manual annotation)
is refined by prompting SAM with it: its bounding box (two corner points, labels 2 and 3) and,
where the decoder takes one, its mask as the low-resolution mask prompt. The mask is turned into
logits the way SAM 3's video predictor turns a mask given by the user into its output logits
(``add_new_mask`` then ``_use_mask_as_output``), by the same
:func:`~napari_sam3_onnx.engine.decode.mask_to_logits` a propagation's mask seed uses: +10
inside, -10 outside, on the decoder's mask grid (288 x 288 for SAM 3). Those logits are what
SAM 3 feeds back as the mask prompt when the user then clicks on that frame.

Coordinates: masks are ``(rows, cols)`` on the slice; the model input stretches the slice to a
square (:mod:`~napari_sam3_onnx.engine.coords`), so resizing the mask to ``input_size`` and then
to ``mask_size`` puts it where the decoder's low-res grid expects it.
"""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.engine.decode import mask_to_logits
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.models.errors import PromptError


def label_box(mask: np.ndarray) -> np.ndarray | None:
    """``(4,)`` float64 box ``(r0, c0, r1, c1)`` around a ``(rows, cols)`` bool mask's pixels.

    The corners are pixel centres of the outermost pixels, widened by half a pixel each side so
    a one-pixel-wide label still has an area. None for an empty mask.
    """
    rows, cols = np.nonzero(np.asarray(mask, bool))
    if rows.size == 0:
        return None
    return np.array([rows.min() - 0.5, cols.min() - 0.5, rows.max() + 0.5, cols.max() + 0.5])


def label_logits(mask: np.ndarray, input_size: tuple[int, int],
                 mask_size: tuple[int, int]) -> np.ndarray:
    """A label's ``(rows, cols)`` bool mask as ``mask_size`` float32 mask-prompt logits.

    :func:`~napari_sam3_onnx.engine.decode.mask_to_logits` (the conversion a propagation's mask
    seed uses too): about +10 inside the label, -10 outside, on the decoder's low-res grid.
    """
    return mask_to_logits(mask, input_size, mask_size)[0]


def label_prompt(mask: np.ndarray, points_rc=None, labels=None, *,
                 logits: np.ndarray | None = None) -> Prompt:
    """The prompt refining one label: its box, clicks (``(N, 2)`` ``(row, col)``), mask logits.

    ``logits`` (from :func:`label_logits`, or the previous answer's feedback logits) is the
    mask prompt; None where the decoder takes none (box and clicks alone).

    Raises
    ------
    PromptError
        The label has no pixel on this slice.
    """
    box = label_box(mask)
    if box is None:
        raise PromptError("The label has no pixel on this slice: pick a label on this plane.")
    pts = np.zeros((0, 2)) if points_rc is None else points_rc
    return Prompt.clicks(pts, labels, box_rc=box, mask_logits=logits)


def replace_label(plane: np.ndarray, label_id: int, mask: np.ndarray) -> np.ndarray:
    """``plane`` with label ``label_id`` replaced by ``mask`` (a new array; ``plane`` is kept).

    Exactly that id's pixels change: its old pixels become background, then the mask's pixels
    that are background or already that id take it. Other ids' pixels are never written.

    Parameters
    ----------
    plane : numpy.ndarray
        ``(rows, cols)`` integer labels.
    label_id : int
        The label refined (> 0).
    mask : numpy.ndarray
        ``(rows, cols)`` bool, its new pixels.
    """
    plane = np.asarray(plane)
    if mask.shape != plane.shape:
        raise PromptError(f"The mask {mask.shape} does not fit the labels plane {plane.shape}.")
    new = np.where(plane == label_id, 0, plane).astype(plane.dtype)
    new[np.asarray(mask, bool) & (new == 0)] = label_id
    return new
