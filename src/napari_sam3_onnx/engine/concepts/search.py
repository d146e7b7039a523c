"""Text concept search: "find every nucleus" on a slice or a stack, as labelled instances.

Per slice: the language encoder's output for each phrase (cached: once per phrase, never once per
slice), the detector on the slice's cached embedding, a score floor, masks upsampled to the slice,
overlaps resolved by score (the higher-scoring instance keeps a contested pixel), optional
minimum size and hole filling, fresh ids and a table row per instance.

Reference behaviour (docs/layouts.md#concept-detections): score = sigmoid(logit) x
sigmoid(presence) (the adapter computes it), keep score > floor (upstream 0.5), masks are bilinear
resizes of the low-res maps, thresholded by their kind.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from napari_sam3_onnx.engine import coords
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.postprocess import logits_to_mask, upsample_crop
from napari_sam3_onnx.models.base import (
    Capability,
    Detections,
    Embedding,
    SamAdapter,
    TextEmbedding,
)
from napari_sam3_onnx.models.errors import PromptError

#: SAM 3's literal text for exemplar-only (geometry) prompts.
VISUAL = "visual"
DEFAULT_FLOOR = 0.5


class TextCache:
    """Language-encoder outputs per phrase for one adapter (thread-safe).

    ``calls`` counts how often the language encoder really ran.
    """

    def __init__(self, adapter: SamAdapter, tokenizer: ClipTokenizer) -> None:
        self.adapter = adapter
        self.tokenizer = tokenizer
        self.calls = 0
        self._items: dict[str, TextEmbedding] = {}
        self._lock = threading.Lock()

    def get(self, text: str) -> TextEmbedding:
        """The phrase's text embedding, running the language encoder only the first time."""
        key = ClipTokenizer.clean(text).lower()
        with self._lock:
            hit = self._items.get(key)
        if hit is not None:
            return hit
        ids = self.tokenizer.encode(text)
        emb = self.adapter.concept_detector.encode_text(ids)
        with self._lock:
            self.calls += 1
            self._items[key] = emb
        return emb


def parse_concepts(text: str) -> list[str]:
    """Split a comma-separated field into distinct phrases (order kept, blanks dropped).

    Raises
    ------
    PromptError
        No phrase is left, or the text is not valid Unicode (lone surrogates).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: bytes that were not UTF-8
        raise PromptError(f"The concepts {text!r} hold characters that are not valid text "
                          f"(position {exc.start}; often bytes that were not UTF-8): type "
                          "them again as plain text.") from None
    seen: list[str] = []
    for part in text.split(","):
        phrase = " ".join(part.split())
        if phrase and phrase.lower() not in (s.lower() for s in seen):
            seen.append(phrase)
    if not seen:
        raise PromptError("Type at least one concept, e.g. 'nucleus' or 'nucleus, mitochondrion'.")
    return seen


@dataclass(frozen=True)
class Exemplars:
    """Exemplar boxes in slice coordinates.

    Attributes
    ----------
    boxes_rc : numpy.ndarray
        ``(K, 4)`` float ``(r0, c0, r1, c1)`` corners (any order; clipped to the slice).
    positive : numpy.ndarray
        ``(K,)`` bool, True = "more like this", False = "not this".
    """

    boxes_rc: np.ndarray
    positive: np.ndarray

    def to_model(self, image_shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """``(K, 4)`` cxcywh normalised boxes and ``(K,)`` int64 labels; invalid boxes refused."""
        boxes, labels = [], []
        for box, pos in zip(self.boxes_rc, self.positive, strict=True):
            clean = coords.normalise_box_rc(box, image_shape)
            if clean is None:
                raise PromptError(
                    f"Exemplar box {np.round(box, 1).tolist()} is outside the image or has no "
                    "area."
                )
            boxes.append(coords.box_rc_to_cxcywh(clean, image_shape))
            labels.append(1 if pos else 0)
        return np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int64)


@dataclass
class Instance:
    """One found instance (a row of the features table)."""

    id: int
    concept: str
    score: float
    area: int
    index: tuple[int, ...]
    box_rc: tuple[float, float, float, float]


@dataclass
class SliceResult:
    """Labels of one slice and its instances.

    Attributes
    ----------
    labels : numpy.ndarray
        ``(rows, cols)`` int32 instance ids (0 = background).
    instances : list of Instance
        One per id.
    min_score : float or None
        The score cut the detector's graph applied itself (``Detections.min_score``; 0.0 for
        raw heads): floors below it cannot find more. None when no detection ran.
    """

    labels: np.ndarray
    instances: list[Instance] = field(default_factory=list)
    min_score: float | None = None


def _threshold(det: Detections) -> float:
    return 0.0 if det.mask_kind == "logits" else 0.5


def binary_masks(det: Detections, shape: tuple[int, int]) -> np.ndarray:
    """``(N, rows, cols)`` bool masks of detections, upsampled to ``shape``."""
    out = np.zeros((len(det), *shape), dtype=bool)
    for i in range(len(det)):
        out[i] = logits_to_mask(det.masks[i].astype(np.float32), shape, _threshold(det))
    return out


def search_slice(
    adapter: SamAdapter,
    embedding: Embedding,
    concepts: Sequence[str],
    texts: TextCache,
    floor: float = DEFAULT_FLOOR,
    exemplars: Exemplars | None = None,
    min_area: int = 0,
    fill_holes: bool = False,
    first_id: int = 1,
    index: tuple[int, ...] = (),
) -> SliceResult:
    """Find every instance of each concept on one encoded slice.

    Parameters
    ----------
    adapter, embedding
        A bundle with the ``text`` capability and the slice's embedding.
    concepts : Sequence[str]
        Phrases, each its own class; ``[]`` with exemplars searches with SAM's "visual" text.
    texts : TextCache
        Shared language-encoder cache.
    floor : float
        Keep instances with score > floor. A graph that cuts at its own threshold (wkentaro's
        0.5) cannot return lower scores, so a lower floor has no effect there.
    exemplars : Exemplars, optional
        Positive / negative example boxes on this slice.
    min_area : int
        Drop instances with fewer pixels (after overlap resolution).
    fill_holes : bool
        Fill holes inside each instance.
    first_id : int
        Id of the first instance; ids are consecutive.
    index : tuple[int, ...]
        The slice's index, recorded in the table.

    Returns
    -------
    SliceResult
        ``(rows, cols)`` int32 labels (0 = background) and one :class:`Instance` per id.
    """
    adapter.require(Capability.TEXT)
    shape = embedding.image_shape
    boxes = labels = None
    if exemplars is not None and len(exemplars.boxes_rc):
        boxes, labels = exemplars.to_model(shape)
    phrases = list(concepts) or [VISUAL]
    # Candidates in phrase, then detection order: (score, phrase, (window, bool crop) or None).
    # Masks are upsampled only where they can be on (postprocess.upsample_crop), and overlaps
    # are resolved in those windows: nothing here costs a full slice per instance.
    cands: list[tuple[float, str, tuple | None]] = []
    cut: float | None = None
    for phrase in phrases:
        det = adapter.concept_detector.detect(embedding, texts.get(phrase), boxes, labels)
        cut = float(det.min_score) if cut is None else max(cut, float(det.min_score))
        for i in np.flatnonzero(det.scores > floor):
            hit = upsample_crop(det.masks[i].astype(np.float32), shape, _threshold(det))
            cands.append((float(det.scores[i]), phrase, hit))
    out = np.zeros(shape, np.int32)
    result = SliceResult(out, min_score=cut)
    if not cands:
        return result
    scores = np.array([c[0] for c in cands], np.float64)
    windows = [(slice(h[0][0], h[0][1]), slice(h[0][2], h[0][3])) if h else None
               for _, _, h in cands]
    covered = np.zeros(shape, bool)  # pixels of any candidate (hole filling may not take them)
    if fill_holes:
        for (_, _, hit), win in zip(cands, windows, strict=True):
            if hit is not None:
                covered[win] |= hit[1]
    # Each pixel goes to the highest-scoring instance that covers it (ties: the earlier one).
    claimed = np.zeros(shape, bool)
    next_id = first_id
    for i in np.argsort(-scores, kind="stable"):
        hit, win = cands[i][2], windows[i]
        if hit is None:
            continue
        mine = hit[1] & ~claimed[win]
        claimed[win] |= hit[1]
        if fill_holes:  # in the window: a hole never reaches past the mask's own extent
            mine = ndimage.binary_fill_holes(mine) & (mine | ~covered[win])
        area = int(mine.sum())
        if area == 0 or area < min_area:
            continue
        out[win][mine] = next_id
        rr, cc = np.nonzero(mine)
        r0, c0 = win[0].start, win[1].start
        result.instances.append(
            Instance(next_id, cands[i][1], float(scores[i]), area, tuple(index),
                     (float(rr.min() + r0), float(cc.min() + c0), float(rr.max() + r0),
                      float(cc.max() + c0)))
        )
        next_id += 1
    return result
