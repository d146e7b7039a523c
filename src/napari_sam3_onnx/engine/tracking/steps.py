"""One object on one slice: the decode steps propagation is built from.

* a prompted (conditioning) slice: the SAM head on the raw embedding (the adapter adds
  ``no_mem_embed``), SAM's candidate rules and object-score gating
  (docs/layouts.md#prompted-slices);
* a mask seed: the mask itself is the slice's output, as SAM 3's ``add_new_mask`` does;
* a tracked slice: memory attention, the SAM head with no points, the best-IoU candidate and
  occlusion gating (10.4-5/6);
* carry-over (bundles without memory graphs): the previous slice's mask becomes a box, a positive
  click at its most interior pixel and, where the decoder takes one, a mask prompt.

Every step returns a :class:`SliceOutput` plus the un-filled logits the memory encoder gets
(upstream encodes memories before any hole filling). Prompted, carried-over and tracked slices
go through the one decode step (:func:`~.decode.decode_step`) the click path uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from napari_sam3_onnx.engine.decode import NO_OBJ_SCORE, Decoded, decode_step, mask_to_logits
from napari_sam3_onnx.engine.interactive import Prompt, prepare_prompt
from napari_sam3_onnx.engine.interactive import decode_prompt as _decode
from napari_sam3_onnx.engine.postprocess import logits_to_mask
from napari_sam3_onnx.engine.tracking.memory_select import Selection
from napari_sam3_onnx.models.base import Embedding, MaskCandidates, SamAdapter
from napari_sam3_onnx.models.errors import PromptError

__all__ = ["NO_OBJ_SCORE", "SliceOutput", "decode_mask_seed", "decode_prompt", "mask_prompt",
           "track_with_memory"]
#: Margin added around a carried-over box, as a fraction of its size (at least 2 px), so an
#: object that moves a little between slices stays inside it.
BOX_MARGIN = 0.1


@dataclass(frozen=True)
class SliceOutput:
    """One object's result on one slice.

    Attributes
    ----------
    mask : numpy.ndarray
        ``(rows, cols)`` bool on the slice.
    low_res_logits : numpy.ndarray
        ``(h, w)`` float32 logits over the whole model input (after hole filling: what is
        shown); all ``-1024`` when the object is absent.
    object_score : float
        Object-presence logit (``<= 0``: absent).
    iou : float
        Predicted IoU of the chosen candidate (1.0 for a mask seed).
    pointer : numpy.ndarray or None
        ``(C,)`` float32 object pointer (memory bundles only).
    conditioning : bool
        The slice was prompted (not tracked).
    feedback_logits : numpy.ndarray or None
        ``(h, w)`` float32 logits as the decoder gave them, before hole filling (None: the same
        as ``low_res_logits``, nothing was filled); the mask prompt carry-over feeds back.
    """

    mask: np.ndarray
    low_res_logits: np.ndarray
    object_score: float
    iou: float
    pointer: np.ndarray | None = None
    conditioning: bool = False
    feedback_logits: np.ndarray | None = None

    @property
    def present(self) -> bool:
        """The object is there and has at least one pixel."""
        return self.object_score > 0 and bool(self.mask.any())

    @property
    def fed_back(self) -> np.ndarray:
        """``(h, w)`` float32 logits to feed back as a mask prompt (the decoder's own)."""
        return self.low_res_logits if self.feedback_logits is None else self.feedback_logits


def _pointer(cands: MaskCandidates, required: bool) -> np.ndarray | None:
    ptr = cands.extras.get("object_pointer")
    if ptr is None and required:
        raise ValueError("the adapter's predict_masks returned no extras['object_pointer']; "
                         "memory propagation needs it")
    return None if ptr is None else np.asarray(ptr, np.float32).reshape(-1)


def _output(step: Decoded, shape: tuple[int, int], conditioning: bool,
            need_pointer: bool) -> tuple[SliceOutput, np.ndarray]:
    """A slice's output from the decode step, and the logits its memory is encoded from."""
    cands = step.candidates
    iou = float(np.nanmax(cands.iou)) if np.isfinite(cands.iou).any() else 1.0
    out = SliceOutput(logits_to_mask(step.display_logits, shape), step.display_logits,
                      step.object_score, iou, _pointer(cands, need_pointer), conditioning,
                      step.feedback_logits)
    return out, step.feedback_logits


def decode_prompt(
    adapter: SamAdapter, embedding: Embedding, prompt: Prompt, hole_area: int,
    need_pointer: bool,
) -> tuple[SliceOutput, np.ndarray]:
    """Decode a prompted slice without memory (SAM 3: ``F + no_mem_embed``)."""
    step = _decode(adapter, embedding, prompt, hole_area)
    return _output(step, embedding.image_shape, True, need_pointer)


def decode_mask_seed(
    adapter: SamAdapter, embedding: Embedding, mask: np.ndarray, need_pointer: bool
) -> tuple[SliceOutput, np.ndarray]:
    """A user's mask as the prompted slice's output (SAM 3's ``add_new_mask``).

    The mask is resized to the model input (bilinear, antialiased, ``>= 0.5``), mapped to
    logits ``20 m - 10`` and downsampled (antialiased) to the mask size; the object score is
    +10 if any pixel is set, else -10. The object pointer comes from the SAM head: with the mask
    as its mask prompt and no points where the decoder accepts a mask prompt (as upstream does),
    else with a box and an interior click derived from the mask (:func:`mask_prompt`).

    Raises
    ------
    PromptError
        The mask's shape differs from the slice.
    """
    shape = embedding.image_shape
    mask = np.asarray(mask, bool)
    if mask.shape != tuple(shape):
        raise PromptError(f"The seed mask has shape {mask.shape} but the slice is {shape}.")
    low, logits_hr = mask_to_logits(mask, embedding.input_size, adapter.mask_size)
    present = bool(mask.any())
    pointer = None
    if need_pointer and present:
        decoder = adapter.prompt_decoder
        if decoder.accepts_mask_input:
            cands = decoder.predict_masks(embedding, np.zeros((0, 2), np.float32),
                                          np.zeros(0, np.int64), low.astype(np.float32))
        else:
            xy, labels = prepare_prompt(mask_prompt(mask, None), shape, embedding.input_size)
            cands = decoder.predict_masks(embedding, xy, labels, None)
        pointer = _pointer(cands, True)
    elif need_pointer:
        raise PromptError("The seed mask is empty; paint the object on the seed slice.")
    score = 10.0 if present else -10.0
    return SliceOutput(mask.copy(), low, score, 1.0, pointer, True), logits_hr


def track_with_memory(
    adapter: SamAdapter, embedding: Embedding, selection: Selection, max_obj_ptrs: int,
    hole_area: int,
) -> tuple[SliceOutput, np.ndarray]:
    """Decode a tracked slice from the memory bank's selection.

    Pointer offsets go to the adapter as slice distances rescaled so that the graph's fixed
    division by ``max_obj_ptrs - 1`` yields SAM 3's ``position / (max_ptrs - 1)``
    (``max_ptrs = min(num_slices, max_obj_ptrs)``); identical for stacks of >= 16 slices.
    """
    scale = (max_obj_ptrs - 1) / selection.pointer_norm if selection.pointer_norm > 0 else 1.0
    offsets = [float(p) * scale for p in selection.pointer_positions]
    conditioned = adapter.memory_graphs.memory_attend(
        embedding, list(selection.memories), list(selection.memory_rows), selection.pointers,
        offsets)
    cands = adapter.prompt_decoder.predict_masks(conditioned, np.zeros((0, 2), np.float32),
                                                 np.zeros(0, np.int64))
    return _output(decode_step(cands, 0, hole_area), embedding.image_shape, False, True)


def interior_point(mask: np.ndarray) -> tuple[int, int]:
    """``(row, col)`` of the pixel farthest from the mask's edge (distance-transform maximum).

    The transform runs on the mask's bounding box with a one-pixel background frame: every
    pixel outside the box is background and no farther than the frame, so distances, maximum
    and tie order (first in raster order) are those of the whole slice.
    """
    mask = np.asarray(mask, bool)
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return 0, 0
    r0, c0 = int(rows[0]), int(cols[0])
    padded = np.pad(mask[r0:int(rows[-1]) + 1, c0:int(cols[-1]) + 1], 1)
    dist = ndimage.distance_transform_edt(padded)[1:-1, 1:-1]
    r, c = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return int(r) + r0, int(c) + c0


def mask_prompt(mask: np.ndarray, logits: np.ndarray | None) -> Prompt:
    """A prompt that asks for the object in ``mask`` again: box + interior click (+ logits).

    The box is the mask's bounding box grown by :data:`BOX_MARGIN` (at least 2 px) on each side;
    the click is the mask's most interior pixel; ``logits`` (``(h, w)`` low-res), if given, ride
    along as the mask prompt for decoders that take one.
    """
    rr, cc = np.nonzero(mask)
    if len(rr) == 0:
        raise PromptError("Cannot carry an empty mask to the next slice.")
    r0, r1, c0, c1 = rr.min(), rr.max(), cc.min(), cc.max()
    mr = max(2.0, BOX_MARGIN * (r1 - r0 + 1))
    mc = max(2.0, BOX_MARGIN * (c1 - c0 + 1))
    box = np.array([r0 - mr, c0 - mc, r1 + mr, c1 + mc], np.float64)
    return Prompt.clicks([interior_point(mask)], [1], box_rc=box, mask_logits=logits)
