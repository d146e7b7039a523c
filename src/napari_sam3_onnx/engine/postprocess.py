"""Turning SAM's low-resolution outputs into masks on the slice, as SAM 3's predictors do.

References (docs/layouts.md#clicks-and-boxes-on-the-sam-head): candidate choice by predicted IoU and
"dynamic multimask via stability" (delta 0.05, threshold 0.98); low-res logits clamped to +-32
before they are fed back; holes up to 256 px (at the 288-px mask scale) filled in the low-res
logits; bilinear upsampling (``align_corners=False``) to the slice, then ``logit > 0``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from skimage.measure import label

from napari_sam3_onnx.models.base import MaskCandidates
from napari_sam3_onnx.models.imageops import resample_matrix, resize_bilinear

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


@lru_cache(maxsize=64)
def _reach(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last input sample with a positive weight, per output sample (upsampling)."""
    m = resample_matrix(n_in, n_out, False)
    first = np.full(n_out, n_in, np.int64)
    last = np.full(n_out, -1, np.int64)
    for i in range(n_out):
        cols = m.indices[m.indptr[i]:m.indptr[i + 1]][m.data[m.indptr[i]:m.indptr[i + 1]] > 0]
        if cols.size:
            first[i], last[i] = cols.min(), cols.max()
    return first, last


def _span(n_in: int, n_out: int, k0: int, k1: int) -> tuple[int, int]:
    """Half-open range of output samples whose weights touch input samples ``k0..k1``.

    Empty (``(0, 0)``) when none does (a shrinking resize can skip input samples).
    """
    first, last = _reach(n_in, n_out)
    hit = np.flatnonzero((last >= k0) & (first <= k1))
    return (int(hit[0]), int(hit[-1]) + 1) if hit.size else (0, 0)


def upsample_crop(
    low: np.ndarray, shape: tuple[int, int], threshold: float = 0.0
) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """``upsample_logits(low, shape) > threshold``, computed only where it can be True.

    Each upsampled pixel is a convex combination of the low-res pixels under its kernel, so it
    can exceed ``threshold`` only where one of those does. Only the rows and columns reached by
    the low-res pixels above the threshold are resampled, with the same weights in the same
    order as :func:`upsample_logits` (the same values there); everything else is False. A mask
    that covers a small part of a large slice costs a small part of a full upsampling.

    Parameters
    ----------
    low : numpy.ndarray
        ``(h, w)`` low-res map (logits, probabilities, 0/1).
    shape : tuple[int, int]
        ``(rows, cols)`` of the slice.
    threshold : float
        0 for logits, 0.5 for probabilities and binary masks.

    Returns
    -------
    ((r0, r1, c0, c1), numpy.ndarray) or None
        The window ``[r0:r1, c0:c1]`` of the slice and its bool mask; None when no pixel is
        above the threshold.
    """
    low = np.asarray(low, dtype=np.float32)
    # a hair below a positive threshold: float rounding of weights that sum to 1 cannot lift a
    # combination of values <= threshold - margin above the threshold
    above = low > threshold - abs(threshold) * 1e-5
    if not above.any():
        return None
    (h, w), (rows, cols) = low.shape, (int(shape[0]), int(shape[1]))
    rr, cc = np.flatnonzero(above.any(axis=1)), np.flatnonzero(above.any(axis=0))
    r0, r1 = _span(h, rows, int(rr[0]), int(rr[-1]))
    c0, c1 = _span(w, cols, int(cc[0]), int(cc[-1]))
    if r1 == r0 or c1 == c0:
        return None
    tmp = resample_matrix(h, rows, False)[r0:r1] @ low  # rows first, as resize_bilinear
    vals = resample_matrix(w, cols, False)[c0:c1] @ np.ascontiguousarray(tmp.T)
    return (r0, r1, c0, c1), vals.T > threshold


def logits_to_mask(
    logits: np.ndarray, shape: tuple[int, int], threshold: float = 0.0
) -> np.ndarray:
    """``(rows, cols)`` bool mask: upsampled logits above ``threshold`` (0 for logits)."""
    out = np.zeros((int(shape[0]), int(shape[1])), dtype=bool)
    hit = upsample_crop(logits, shape, threshold)
    if hit is not None:
        (r0, r1, c0, c1), crop = hit
        out[r0:r1, c0:c1] = crop
    return out
