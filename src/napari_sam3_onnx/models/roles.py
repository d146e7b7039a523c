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
from typing import Protocol, runtime_checkable

import numpy as np

from .memory import MemoryFrame, MemorySettings
from .values import Detections, Embedding, MaskCandidates, TextEmbedding


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
        """Run the SAM head on point/box prompts.

        Parameters
        ----------
        embedding : Embedding
            From :meth:`~.base.SamAdapter.encode`.
        points_xy : numpy.ndarray
            ``(N, 2)`` float32 ``(x, y)`` in model-input pixels. A box is two points, top-left then
            bottom-right, placed **before** the clicks.
        labels : numpy.ndarray
            ``(N,)`` int: 1 positive click, 0 negative click, 2 box top-left, 3 box bottom-right.
        mask_input : numpy.ndarray, optional
            ``mask_size`` float32 logits of a previous prediction (clamped to +-32 by the caller).
        """
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
        """Run the language encoder.

        Parameters
        ----------
        token_ids : Sequence[int]
            CLIP BPE ids including start (49406) and end (49407) tokens, at most
            :attr:`context_length` long; the adapter pads them as its graph expects.
        """
        ...

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Run the concept detector.

        Parameters
        ----------
        embedding, text
            From :meth:`~.base.SamAdapter.encode` and :meth:`ConceptDetector.encode_text` (use
            the text ``"visual"`` for exemplar-only searches, as SAM 3 does).
        boxes_cxcywh : numpy.ndarray, optional
            ``(K, 4)`` float32 exemplar boxes ``(cx, cy, w, h)`` normalised to [0, 1].
        box_labels : numpy.ndarray, optional
            ``(K,)`` bool or int, 1/True = positive exemplar.
        """
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
        """Run the memory encoder on one decoded slice.

        Parameters
        ----------
        embedding : Embedding
            The slice's embedding; its **raw** top-level feature is used (never
            ``+ no_mem_embed``, never the conditioned one).
        mask_logits : numpy.ndarray
            ``(h, w)`` float32 logits of the chosen mask over the whole model input, at any size
            (e.g. the 288 x 288 low-res candidate); resized bilinearly (``align_corners=False``)
            to the graph's mask input (1008 x 1008 in SAM 3).
        object_score : float
            The decoder's object-score logit (<= 0: the memory says "object absent").
        is_mask_from_points : bool
            True for prompted slices (the graph binarises the mask at logit 0), False for
            tracked ones (it uses ``sigmoid(logits)``).

        Returns
        -------
        MemoryFrame
            Layout-native features and positional encoding; keep it in the bank unchanged.
        """
        ...

    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        """Condition a slice's raw feature on the memory bank.

        Parameters
        ----------
        embedding : Embedding
            The slice to track.
        memories : sequence of MemoryFrame
            Spatial memories from :meth:`MemoryGraphs.memory_encode`, in upstream order
            (selected prompted slices first, then recent slices oldest to newest); at least one.
        memory_rows : sequence of int
            Temporal row of each memory in ``0 .. num_maskmem - 1``: ``num_maskmem - 1`` for a
            prompted slice, ``t_rel - 1`` for a slice ``t_rel`` steps back (0 = previous slice).
        pointers : numpy.ndarray
            ``(P, C)`` float32 object pointers (``MaskCandidates.extras["object_pointer"]``),
            prompted slices first; ``P`` may be 0.
        pointer_offsets : sequence of float
            ``(P,)`` slice distance of each pointer (>= 0, not normalised).

        Returns
        -------
        Embedding
            The embedding plus the conditioned feature (key :data:`CONDITIONED`); decode it with
            ``predict_masks`` and no points.

        Raises
        ------
        ValueError
            Inconsistent lengths, rows out of range, or more memories / pointers than the graph
            takes (:attr:`MemorySettings.max_memories`, :attr:`MemorySettings.max_pointers`).
        """
        ...


@runtime_checkable
class BatchPromptDecoder(Protocol):
    """A prompt decoder with a batch axis: many single clicks, one object each, in one call."""

    def predict_point_batch(
        self, embedding: Embedding, points_xy: np.ndarray
    ) -> list[MaskCandidates]:
        """Decode each of ``(B, 2)`` float32 ``(x, y)`` points as its own positive click."""
        ...


def predict_point_batch(
    decoder: PromptDecoder, embedding: Embedding, points_xy: np.ndarray
) -> list[MaskCandidates]:
    """Decode each of several points as its own single positive click.

    Automatic segmentation sends a grid of clicks this way. A decoder with a batch axis
    (:class:`BatchPromptDecoder`) decodes them in one call; any other gets one
    :meth:`PromptDecoder.predict_masks` call per point (same results).

    Parameters
    ----------
    decoder : PromptDecoder
        The bundle's prompt decoder (``adapter.prompt_decoder``).
    embedding : Embedding
        The image's embedding.
    points_xy : numpy.ndarray
        ``(B, 2)`` float32 ``(x, y)`` in model-input pixels, one object per point.

    Returns
    -------
    list of MaskCandidates
        One per point, in order.
    """
    pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
    if isinstance(decoder, BatchPromptDecoder):
        return decoder.predict_point_batch(embedding, pts)
    one = np.ones(1, np.int64)
    return [decoder.predict_masks(embedding, p[None], one) for p in pts]
