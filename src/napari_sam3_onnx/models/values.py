"""The values adapters and the engine pass around: capabilities, embeddings, masks, detections.

Plain data (numpy arrays in dataclasses); the adapter protocol (:mod:`.base`) and its roles
(:mod:`.roles`) both speak in these, so they sit in a module of their own that imports neither.
Coordinates are **model-input pixels** (see :mod:`.base`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np


class Capability(enum.StrEnum):
    """What a bundle can do; the widget enables its controls from these."""

    ENCODE = "encode"
    CLICKS = "clicks"
    """Positive/negative point prompts that segment one instance (a SAM head)."""
    BOXES = "boxes"
    """Box prompts that segment the boxed instance (a SAM head, or the detector as a fallback)."""
    TEXT = "text"
    """Concept search from a text phrase (language encoder + detector)."""
    EXEMPLARS = "exemplars"
    """Positive/negative exemplar boxes for concept search."""
    MEMORY = "memory"
    """Memory encoder + memory attention for slice-to-slice propagation."""


@dataclass(frozen=True)
class Embedding:
    """The encoder's output for one image, as an adapter needs it to answer prompts.

    Attributes
    ----------
    features : Mapping[str, numpy.ndarray]
        Named arrays, exactly as the adapter's prompt graphs consume them (e.g.
        ``"image_embeddings.2"`` of shape ``(1, 256, 72, 72)``, float32). Constant tensors such as
        sine position encodings are kept by the adapter once, not per embedding.
    input_size : tuple[int, int]
        ``(height, width)`` of the model input the image was resized to.
    image_shape : tuple[int, int]
        ``(rows, cols)`` of the image that was encoded (before resizing).
    """

    features: Mapping[str, np.ndarray]
    input_size: tuple[int, int]
    image_shape: tuple[int, int]

    @property
    def nbytes(self) -> int:
        """Bytes held by the feature arrays."""
        return int(sum(a.nbytes for a in self.features.values()))


@dataclass(frozen=True)
class MaskCandidates:
    """Candidate masks from a SAM (tracker-head) decoder for one object.

    Attributes
    ----------
    logits : numpy.ndarray
        ``(K, h, w)`` float32 low-resolution mask **logits** (threshold 0) covering the whole model
        input (``h, w`` = the graph's mask size, e.g. 288 x 288).
    iou : numpy.ndarray
        ``(K,)`` float32 predicted IoU of each candidate.
    object_score : float
        Object-presence logit; ``> 0`` means the object is present.
    single_mask_first : bool
        True when candidate 0 is SAM's single-mask token and candidates ``1..K-1`` are the
        multimask outputs (K = 4). False when every candidate is a multimask output (K = 3) or the
        graph already selected one mask (K = 1).
    extras : Mapping[str, numpy.ndarray]
        Layout-specific outputs worth keeping (e.g. ``"object_pointer"`` for propagation).
    """

    logits: np.ndarray
    iou: np.ndarray
    object_score: float
    single_mask_first: bool
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class TextEmbedding:
    """The language encoder's output for one phrase (cache it: it does not depend on the image)."""

    text: str
    features: Mapping[str, np.ndarray]


MaskKind = Literal["logits", "probabilities", "binary"]


@dataclass(frozen=True)
class Detections:
    """Concept-detector output for one image, before any score floor of the caller.

    Attributes
    ----------
    scores : numpy.ndarray
        ``(N,)`` float32 in [0, 1]: sigmoid(logit) x sigmoid(presence) where the graph exposes
        logits, the graph's own score otherwise.
    boxes : numpy.ndarray
        ``(N, 4)`` float32 ``(x0, y0, x1, y1)`` normalised to [0, 1] of the image.
    masks : numpy.ndarray
        ``(N, h, w)`` low-resolution masks covering the whole image; see ``mask_kind``.
    mask_kind : {"logits", "probabilities", "binary"}
        How to threshold ``masks``: logits at 0, probabilities at 0.5, binary at 0.5.
    min_score : float
        The score cut the graph applies itself (0.0 for raw heads; 0.5 for graphs that bake
        SAM 3's confidence threshold in). A caller's floor below it has no effect.
    """

    scores: np.ndarray
    boxes: np.ndarray
    masks: np.ndarray
    mask_kind: MaskKind
    min_score: float = 0.0

    def __len__(self) -> int:
        return int(self.scores.shape[0])
