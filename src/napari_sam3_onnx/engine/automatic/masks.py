"""SAM's automatic-mask filters in numpy: stability score, mask boxes, box NMS, small regions.

Boxes here are ``(r0, c0, r1, c1)`` float with **inclusive** ends (the first and last row and
column a mask covers), as SAM's ``batched_mask_to_box`` gives them (there in ``x, y`` order);
their area is ``(r1 - r0) * (c1 - c0)``, as torchvision's ``box_area`` computes it.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage


def stability_scores(logits: np.ndarray, offset: float, threshold: float = 0.0) -> np.ndarray:
    """SAM's stability score of each mask: ``#(logit > t + offset) / #(logit > t - offset)``.

    Parameters
    ----------
    logits : numpy.ndarray
        ``(K, h, w)`` float mask logits.
    offset : float
        ``stability_score_offset`` (logit units).
    threshold : float
        The mask threshold (0 for logits).

    Returns
    -------
    numpy.ndarray
        ``(K,)`` float64 in [0, 1]; a mask empty at both levels scores 1.0 (it is then dropped
        as empty anyway).
    """
    flat = logits.reshape(len(logits), -1)
    inner = np.count_nonzero(flat > threshold + offset, axis=1)
    outer = np.count_nonzero(flat > threshold - offset, axis=1)
    return np.where(outer > 0, inner / np.maximum(outer, 1), 1.0)


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """Inclusive ``(r0, c0, r1, c1)`` of a 2-D bool mask's pixels, None if it is empty."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return int(rows[0]), int(cols[0]), int(rows[-1]), int(cols[-1])


def box_iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one ``(4,)`` box against ``(N, 4)`` boxes (areas as torchvision's)."""
    r0 = np.maximum(box[0], others[:, 0])
    c0 = np.maximum(box[1], others[:, 1])
    r1 = np.minimum(box[2], others[:, 2])
    c1 = np.minimum(box[3], others[:, 3])
    inter = np.clip(r1 - r0, 0, None) * np.clip(c1 - c0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def box_nms(boxes: np.ndarray, scores: np.ndarray, iou_thresh: float) -> np.ndarray:
    """Greedy non-maximum suppression: indices of the boxes kept, best score first.

    A box is dropped when its IoU with an already kept, higher-scoring box exceeds
    ``iou_thresh`` (torchvision's ``nms`` rule; ties keep the earlier box).

    Parameters
    ----------
    boxes : numpy.ndarray
        ``(N, 4)`` float ``(r0, c0, r1, c1)``.
    scores : numpy.ndarray
        ``(N,)`` float.
    iou_thresh : float
        Suppression threshold.
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    keep: list[int] = []
    alive = np.ones(len(boxes), bool)
    for pos, i in enumerate(order):
        if not alive[i]:
            continue
        keep.append(int(i))
        rest = order[pos + 1:]
        rest = rest[alive[rest]]
        if rest.size:
            alive[rest[box_iou(boxes[i], boxes[rest]) > iou_thresh]] = False
    return np.asarray(keep, np.int64)


def _small_components(mask: np.ndarray, area_thresh: int) -> tuple[np.ndarray, np.ndarray]:
    """8-connected labels of ``mask`` and a lookup of which labels are smaller than the area."""
    lab, _ = ndimage.label(mask, structure=np.ones((3, 3), bool))
    sizes = np.bincount(lab.ravel())
    small = sizes < area_thresh
    small[0] = False
    return lab, small


def remove_small_regions(mask: np.ndarray, area_thresh: int) -> tuple[np.ndarray, bool]:
    """Fill holes, then drop islands, smaller than ``area_thresh`` pixels, as SAM does.

    As in SAM's ``remove_small_regions``: regions are 8-connected; a "hole" is any background
    component (the outer background too, when it is that small); when every island is small the
    largest one is kept.

    Returns
    -------
    (numpy.ndarray, bool)
        The cleaned ``(rows, cols)`` bool mask and whether anything changed.
    """
    if area_thresh <= 0 or not mask.any():
        return mask, False
    lab, small = _small_components(~mask, area_thresh)
    filled = mask | small[lab]
    lab, small = _small_components(filled, area_thresh)
    if small[1:].all():  # every island is small: keep the biggest
        sizes = np.bincount(lab.ravel())
        sizes[0] = 0
        cleaned = lab == int(np.argmax(sizes))
    else:
        cleaned = filled & ~small[lab]
    return cleaned, bool((cleaned != mask).any())
