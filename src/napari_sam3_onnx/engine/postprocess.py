"""Turning SAM's low-resolution outputs into masks on the slice, as SAM 3's predictors do.

References (../shared/model-contracts.md section 2.6): candidate choice by predicted IoU and
"dynamic multimask via stability" (delta 0.05, threshold 0.98); low-res logits clamped to +-32
before they are fed back; holes up to 256 px (at the 288-px mask scale) filled in the low-res
logits; bilinear upsampling (``align_corners=False``) to the slice, then ``logit > 0``.
"""

from __future__ import annotations

import numpy as np
from skimage.measure import label

from ..models.base import MaskCandidates
from ..models.imageops import resize_bilinear

STABILITY_DELTA = 0.05
STABILITY_THRESHOLD = 0.98
#: Upstream's max hole area, defined on the 288 x 288 low-res mask of SAM 3.
HOLE_AREA_AT_288 = 256
MASK_INPUT_CLAMP = 32.0


def stability(logits: np.ndarray, delta: float = STABILITY_DELTA) -> float:
    """SAM's stability score ``#(logit > delta) / #(logit > -delta)`` (1.0 if both are empty)."""
    inner = np.count_nonzero(logits > delta)
    outer = np.count_nonzero(logits > -delta)
    return 1.0 if outer == 0 else inner / outer


def select_candidate(cands: MaskCandidates, n_prompt_points: int) -> int:
    """Index of the candidate SAM would return.

    Parameters
    ----------
    cands : MaskCandidates
        The decoder's candidates.
    n_prompt_points : int
        Prompt points, counting a box as two (SAM asks for several masks when it is <= 1).

    Notes
    -----
    * One point or fewer: the multimask output with the best predicted IoU.
    * More points, with a single-mask token (K = 4): token 0, unless its stability is below
      0.98, then the best multimask output.
    * More points with a multimask-only decoder (K = 3): the best predicted IoU (the graph has no
      single-mask token to prefer).
    """
    k = cands.logits.shape[0]
    if k == 1:
        return 0
    first_multi = 1 if cands.single_mask_first else 0
    best_multi = first_multi + int(np.argmax(cands.iou[first_multi:]))
    if n_prompt_points <= 1 or not cands.single_mask_first:
        return best_multi
    if stability(cands.logits[0]) >= STABILITY_THRESHOLD:
        return 0
    return best_multi


def hole_area_for(mask_size: tuple[int, int]) -> int:
    """Upstream's 256-px hole area scaled from a 288 x 288 mask to ``mask_size``."""
    return max(0, round(HOLE_AREA_AT_288 * (mask_size[0] * mask_size[1]) / 288**2))


def fill_holes(logits: np.ndarray, max_area: int) -> np.ndarray:
    """Set background components of at most ``max_area`` pixels to a positive logit (+10).

    Parameters
    ----------
    logits : numpy.ndarray
        ``(h, w)`` float32 low-res logits.
    max_area : int
        Largest background component (8-connected) that counts as a hole.
    """
    if max_area <= 0:
        return logits
    background = logits <= 0
    if not background.any():
        return logits
    lab = label(background, connectivity=2)
    areas = np.bincount(lab.ravel())
    small = areas <= max_area
    small[0] = False  # label 0 is the foreground
    holes = small[lab]
    if not holes.any():
        return logits
    out = logits.copy()
    out[holes] = 10.0
    return out


def upsample_logits(logits: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Bilinear (``align_corners=False``) resize of ``(h, w)`` logits to ``shape`` (rows, cols)."""
    return resize_bilinear(logits, shape, antialias=False)


def logits_to_mask(logits: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``(rows, cols)`` bool mask: upsampled logits above 0."""
    return upsample_logits(logits, shape) > 0.0
