"""The four roles a bundle's graphs can play, each a small protocol.

An adapter is an **image encoder** (every bundle has one) and, optionally, a **prompt decoder**
(SAM's tracker head: clicks, boxes, mask prompts), a **concept detector** (language encoder +
detector: text and exemplar search) and **memory graphs** (memory encoder + memory attention:
slice-to-slice propagation). A capability means "the role exists": the adapter's accessors
:attr:`~napari_sam3_onnx.models.base.SamAdapter.prompt_decoder`,
:attr:`~napari_sam3_onnx.models.base.SamAdapter.concept_detector` and
:attr:`~napari_sam3_onnx.models.base.SamAdapter.memory_graphs` return the role or raise
:class:`~napari_sam3_onnx.models.errors.MissingCapabilityError`.

Coordinates are model-input pixels ``(x, y)`` as in :mod:`napari_sam3_onnx.models.base`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from .base import Detections, Embedding, MaskCandidates, TextEmbedding
    from .memory import MemoryFrame, MemorySettings


@runtime_checkable
class ImageEncoder(Protocol):
    """Turns a ``(rows, cols, 3)`` uint8 RGB image into an :class:`Embedding`."""

    @property
    def input_size(self) -> tuple[int, int]:
        """``(height, width)`` of the encoder input."""
        ...

    def encode(self, rgb: np.ndarray) -> Embedding:
        """Encode one image (resized, stretched, normalised as the graph expects)."""
        ...


@runtime_checkable
class PromptDecoder(Protocol):
    """SAM's prompt decoder: point / box / mask prompts -> candidate masks of one object."""

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of the low-resolution masks (and of a mask prompt)."""
        ...

    @property
    def accepts_mask_input(self) -> bool:
        """Whether a previous low-res mask can be given as a prompt."""
        ...

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """Decode ``(N, 2)`` float32 ``(x, y)`` points with ``(N,)`` labels (0, 1, 2, 3)."""
        ...


@runtime_checkable
class ConceptDetector(Protocol):
    """Language encoder + concept detector: a phrase and/or exemplar boxes -> detections."""

    @property
    def context_length(self) -> int:
        """Token context length of the language encoder."""
        ...

    @property
    def max_exemplars(self) -> int | None:
        """Exemplar-box slots of the detector (None: dynamic)."""
        ...

    @property
    def min_score(self) -> float:
        """The score cut the detector applies inside its graph (0.0: none)."""
        ...

    def encode_text(self, token_ids: Sequence[int]) -> TextEmbedding:
        """Run the language encoder on CLIP BPE ids (start and end tokens included)."""
        ...

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Detect every instance of the concept; boxes ``(K, 4)`` cx, cy, w, h in [0, 1]."""
        ...


@runtime_checkable
class MemoryGraphs(Protocol):
    """Memory encoder + memory attention, for slice-to-slice propagation."""

    @property
    def memory_settings(self) -> MemorySettings:
        """What the bundle says about the memory bank."""
        ...

    @property
    def memory_note(self) -> str:
        """A caveat about this bundle's memory for the method note ('' when none)."""
        ...

    def memory_encode(
        self,
        embedding: Embedding,
        mask_logits: np.ndarray,
        object_score: float,
        is_mask_from_points: bool,
    ) -> MemoryFrame:
        """Encode one decoded slice's ``(h, w)`` float32 mask logits into a memory."""
        ...

    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        """Condition a slice's raw feature on the memory bank."""
        ...
