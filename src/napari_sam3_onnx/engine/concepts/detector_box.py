"""Box prompts on bundles that have a concept detector but no SAM head (e.g. wkentaro v0.3).

SAM 3's detector takes a box as an *exemplar* ("things like this"), not as "this thing". As osam
does, the box is sent with SAM 3's text ``"visual"`` as one positive exemplar, and the detection
whose box overlaps the prompt box best is taken as the boxed object.
"""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.engine import coords
from napari_sam3_onnx.engine.concepts.search import VISUAL, TextCache
from napari_sam3_onnx.engine.interactive import ObjectMask
from napari_sam3_onnx.engine.postprocess import logits_to_mask
from napari_sam3_onnx.models.base import Embedding, SamAdapter
from napari_sam3_onnx.models.errors import PromptError


def box_iou_xyxy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of each ``(N, 4)`` box in ``a`` with the one ``(4,)`` box ``b`` (same units)."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, 0], b[0])
    y0 = np.maximum(a[:, 1], b[1])
    x1 = np.minimum(a[:, 2], b[2])
    y1 = np.minimum(a[:, 3], b[3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    return inter / np.maximum(area_a + area_b - inter, 1e-12)


def _as_logits(masks: np.ndarray, kind: str) -> np.ndarray:
    m = masks.astype(np.float32)
    if kind == "logits":
        return m
    if kind == "probabilities":
        p = np.clip(m, 1e-6, 1 - 1e-6)
        return np.log(p / (1 - p)).astype(np.float32)
    return np.where(m > 0.5, 10.0, -10.0).astype(np.float32)


def segment_box_with_detector(
    adapter: SamAdapter, embedding: Embedding, box_rc: np.ndarray, texts: TextCache
) -> ObjectMask:
    """Segment the object in a box with the concept detector.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``text`` capability.
    embedding : Embedding
        The slice's embedding.
    box_rc : numpy.ndarray
        ``(4,)`` corners ``(r0, c0, r1, c1)`` in slice pixels.
    texts : TextCache
        Language-encoder cache (``"visual"`` is encoded once).

    Returns
    -------
    ObjectMask
        The best-overlapping detection; empty with ``object_score = -1`` when none overlaps.
    """
    shape = embedding.image_shape
    box = coords.normalise_box_rc(box_rc, shape)
    if box is None:
        raise PromptError("The box is outside the image or has no area; draw it over the object.")
    cxcywh = coords.box_rc_to_cxcywh(box, shape)[None]
    det = adapter.concept_detector.detect(embedding, texts.get(VISUAL), cxcywh,
                                          np.ones(1, np.int64))
    r0, c0, r1, c1 = box
    target = np.array([c0 / shape[1], r0 / shape[0], c1 / shape[1], r1 / shape[0]])
    nothing = ObjectMask(
        np.zeros(shape, bool), np.full(adapter.mask_size, -1024.0, np.float32), 0.0, -1.0, -1
    )
    if len(det) == 0:
        return nothing
    ious = box_iou_xyxy(det.boxes, target)
    k = int(np.lexsort((-det.scores, -ious))[0])
    if ious[k] <= 0:
        return nothing
    low = _as_logits(det.masks[k], det.mask_kind)
    mask = logits_to_mask(low, shape)
    return ObjectMask(mask, low, float(det.scores[k]), float(det.scores[k]), k)

