"""The decode step every SAM-head answer goes through: pick, gate, fill for display.

Clicks (:func:`~.interactive.segment`, and through it tiles and views), the prompted slices of a
propagation, its carry-over slices and its memory-tracked slices all turn the decoder's candidates
into one mask here. Two logits leave the step and must not be confused:

* ``display_logits``: hole-filled; the mask the user sees (and a label writer arbitrates with);
* ``feedback_logits``: as the decoder gave them (only gated for an absent object); what goes back
  to the decoder as the next mask prompt and to the memory encoder. SAM 3's predictor returns its
  low-res masks unfilled and fills holes only for the mask it shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from napari_sam3_onnx.engine.postprocess import (
    MASK_INPUT_CLAMP,
    fill_holes,
    hole_area_for,
    select_candidate,
)
from napari_sam3_onnx.models.base import MaskCandidates, SamAdapter
from napari_sam3_onnx.models.imageops import resize_bilinear

#: SAM's logit for "object absent" (occlusion gating).
NO_OBJ_SCORE = -1024.0
#: SAM 2 / SAM 3's affine map of a binary mask to logits (``_use_mask_as_output``).
MASK_SCALE, MASK_BIAS = 20.0, -10.0


@dataclass(frozen=True)
class Decoded:
    """One decoder answer reduced to the candidate SAM would return.

    Attributes
    ----------
    display_logits : numpy.ndarray
        ``(h, w)`` float32 low-res logits after hole filling (what is shown).
    feedback_logits : numpy.ndarray
        ``(h, w)`` float32 low-res logits as the decoder gave them (what is fed back); both are
        all :data:`NO_OBJ_SCORE` when the object is absent.
    candidate : int
        Index of the chosen candidate.
    candidates : MaskCandidates
        The decoder's raw answer (IoUs, object score, extras such as the object pointer).
    """

    display_logits: np.ndarray
    feedback_logits: np.ndarray
    candidate: int
    candidates: MaskCandidates

    @property
    def object_score(self) -> float:
        """Presence logit; the object is absent when it is <= 0."""
        return float(self.candidates.object_score)

    @property
    def iou(self) -> float:
        """The decoder's predicted IoU of the chosen candidate."""
        return float(self.candidates.iou[self.candidate])


def mask_input_for(adapter: SamAdapter, logits: np.ndarray | None) -> np.ndarray | None:
    """``(h, w)`` float32 mask prompt from fed-back logits, clamped as SAM does; None if unused.

    None when there are no logits or the decoder takes no mask prompt.
    """
    if logits is None or not adapter.prompt_decoder.accepts_mask_input:
        return None
    return np.clip(logits, -MASK_INPUT_CLAMP, MASK_INPUT_CLAMP).astype(np.float32)


def mask_to_logits(mask: np.ndarray, input_size: tuple[int, int],
                   mask_size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A user's binary mask as SAM's logits (SAM 3's ``add_new_mask`` / ``_use_mask_as_output``).

    The ``(rows, cols)`` mask is resized to the model input (bilinear, antialiased) and kept
    binary (``>= 0.5``), mapped to ``20 m - 10`` and downsampled (antialiased) to the mask size.
    A propagation's mask seed and a refined label's mask prompt are both made here.

    Returns
    -------
    low : numpy.ndarray
        ``mask_size`` float32 low-res logits, about +10 inside and -10 outside.
    high : numpy.ndarray
        ``input_size`` float32 logits at the model input (what the memory encoder takes).
    """
    big = resize_bilinear(np.asarray(mask, np.float32), input_size) >= 0.5
    high = big.astype(np.float32) * MASK_SCALE + MASK_BIAS
    return resize_bilinear(high, mask_size, antialias=True).astype(np.float32), high


def decode_step(cands: MaskCandidates, n_points: int, hole_area: int | None) -> Decoded:
    """Choose SAM's candidate, gate an absent object and fill holes for display only.

    Parameters
    ----------
    cands : MaskCandidates
        The decoder's answer.
    n_points : int
        Prompt points, a box counting as two (candidate rules of
        :func:`~.postprocess.select_candidate`).
    hole_area : int or None
        Largest background hole (low-res pixels) filled in ``display_logits`` (0: none; None:
        SAM 3's 256 px at 288 x 288 scaled to the logits' size).
    """
    k = select_candidate(cands, n_points)
    low = cands.logits[k].astype(np.float32)
    if cands.object_score <= 0:
        low = np.full_like(low, NO_OBJ_SCORE)  # an absent object has no mask
    area = hole_area_for(low.shape) if hole_area is None else hole_area
    return Decoded(fill_holes(low, area), low, k, cands)
