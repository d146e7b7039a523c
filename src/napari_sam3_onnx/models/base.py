"""The one protocol every SAM 3 ONNX layout adapter speaks, and the values it passes around.

Coordinates at this level are **model-input pixels**: ``x`` along the columns and ``y`` along the
rows of the resized ``input_size`` image, with ``(0, 0)`` the top-left pixel's top-left corner
(SAM adds the half-pixel offset inside its prompt encoder, so callers pass plain pixel positions).
The engine converts from slice ``(row, col)`` coordinates; adapters never see the original image.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .errors import MissingCapabilityError
from .graph_info import GraphSignature
from .memory import MemoryFrame, MemorySettings
from .roles import ConceptDetector, MemoryGraphs, PromptDecoder


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


class SamAdapter:
    """Base class of the per-layout adapters: an image encoder plus optional roles.

    The roles (:mod:`napari_sam3_onnx.models.roles`) are a prompt decoder, a concept detector
    and memory graphs. An adapter either composes a role object (:meth:`_attach_prompt_decoder`,
    :meth:`_attach_detector`, :meth:`_attach_memory`, which also grant the capabilities that role
    brings) or plays the role itself (it declares the capability in ``capabilities`` and
    overrides the role's methods). The operations of a missing role raise
    :class:`~napari_sam3_onnx.models.errors.MissingCapabilityError` with a message that names
    the bundle and the missing ability.
    """

    layout: str = "unknown"
    #: Weight precision the bundle declares (its manifest), e.g. "fp32" or "int8 (dynamic) in
    #: image_encoder, language_encoder; fp32 elsewhere"; None when it declares none.
    precision: str | None = None

    #: Composed role objects (None: missing, or played by the adapter itself).
    _prompt_role: PromptDecoder | None = None
    _detector_role: ConceptDetector | None = None
    _memory_role: MemoryGraphs | None = None

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Assign a folder's graphs to this layout's roles, or return None if they do not fit."""
        return None

    capabilities: frozenset[Capability] = frozenset({Capability.ENCODE})

    # ---- geometry, read from the graphs -------------------------------------------------
    @property
    def input_size(self) -> tuple[int, int]:
        """``(height, width)`` of the encoder input."""
        raise NotImplementedError

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of the low-resolution masks (and of a mask prompt)."""
        raise NotImplementedError

    @property
    def max_exemplars(self) -> int | None:
        """Number of exemplar-box slots of the detector (None: dynamic / no limit)."""
        return None if self._detector_role is None else self._detector_role.max_exemplars

    @property
    def context_length(self) -> int:
        """Token context length of the language encoder."""
        role = self.concept_detector
        if self._composed(role):
            return role.context_length
        raise NotImplementedError

    @property
    def min_score(self) -> float:
        """The score cut the detector applies inside its graph (0.0: raw heads, no cut).

        A caller's confidence floor below it has no effect (wkentaro's exports bake in 0.5).
        """
        return 0.0 if self._detector_role is None else self._detector_role.min_score

    @property
    def accepts_mask_input(self) -> bool:
        """Whether :meth:`predict_masks` can take a previous low-res mask as a prompt."""
        return self._prompt_role is not None and self._prompt_role.accepts_mask_input

    def assumptions(self) -> dict[str, tuple[str, str]]:
        """What this adapter assumed or learnt for its folder: ``name -> (value, source)``.

        Names include ``padding`` (who appends SAM's padding point), ``pointer encoding``,
        ``no-memory embedding``, ``normalisation``, ``mask kind`` and ``score cut``; ``source`` is
        the graph or file that said so, or the layout contract when nothing in the bundle does.
        """
        return {}

    @property
    def memory_note(self) -> str:
        """A caveat about this bundle's video memory for the propagation's method note ('')."""
        return "" if self._memory_role is None else self._memory_role.memory_note

    def has(self, capability: Capability) -> bool:
        """Whether this bundle provides ``capability``."""
        return capability in self.capabilities

    def require(self, capability: Capability) -> None:
        """Raise :class:`MissingCapabilityError` unless this bundle provides ``capability``."""
        if capability not in self.capabilities:
            raise MissingCapabilityError(self.layout, capability.value)

    # ---- roles -------------------------------------------------------------------------
    @property
    def prompt_decoder(self) -> PromptDecoder:
        """The SAM prompt decoder (clicks, boxes, mask prompts).

        Raises
        ------
        MissingCapabilityError
            The bundle has no prompt decoder (capability ``clicks``).
        """
        self.require(Capability.CLICKS)
        return self._prompt_role if self._prompt_role is not None else self

    @property
    def concept_detector(self) -> ConceptDetector:
        """The concept detector with its language encoder (text and exemplar search).

        Raises
        ------
        MissingCapabilityError
            The bundle has no concept detector (capability ``text``).
        """
        self.require(Capability.TEXT)
        return self._detector_role if self._detector_role is not None else self

    @property
    def memory_graphs(self) -> MemoryGraphs:
        """The memory encoder and memory attention (propagation with memory).

        Raises
        ------
        MissingCapabilityError
            The bundle has no memory graphs (capability ``memory``).
        """
        self.require(Capability.MEMORY)
        return self._memory_role if self._memory_role is not None else self

    def _attach_prompt_decoder(self, role: PromptDecoder) -> None:
        """Compose ``role`` as the prompt decoder; the bundle gains clicks and boxes."""
        self._prompt_role = role
        self.capabilities = self.capabilities | {Capability.CLICKS, Capability.BOXES}

    def _attach_detector(self, role: ConceptDetector, exemplars: bool) -> None:
        """Compose ``role`` as the detector; text, plus exemplars and boxes if it has slots."""
        self._detector_role = role
        extra = {Capability.EXEMPLARS, Capability.BOXES} if exemplars else set()
        self.capabilities = self.capabilities | {Capability.TEXT, *extra}

    def _attach_memory(self, role: MemoryGraphs) -> None:
        """Compose ``role`` as the memory graphs; the bundle gains memory."""
        self._memory_role = role
        self.capabilities = self.capabilities | {Capability.MEMORY}

    def _composed(self, role: object) -> bool:
        """Whether ``role`` (returned by an accessor) is a composed object, not the adapter."""
        return role is not self

    # ---- operations --------------------------------------------------------------------
    def encode(self, rgb: np.ndarray) -> Embedding:
        """Encode one image.

        Parameters
        ----------
        rgb : numpy.ndarray
            ``(rows, cols, 3)`` uint8 RGB image of any size; the adapter resizes it (bilinear,
            stretched, as SAM 3 does) and normalises it as its graph expects.
        """
        raise NotImplementedError

    def encode_for(self, rgb: np.ndarray, need: Capability) -> Embedding:
        """Encode only what the workflow ``need`` uses (default: everything, as :meth:`encode`).

        ``need`` is :attr:`Capability.TEXT` or :attr:`Capability.EXEMPLARS` (detector features)
        or :attr:`Capability.CLICKS`, :attr:`Capability.BOXES`, :attr:`Capability.MEMORY`
        (tracker features). Layouts with one image encoder encode everything anyway.
        """
        return self.encode(rgb)

    def lacks(self, embedding: Embedding, need: Capability) -> bool:
        """Whether ``embedding`` misses features the workflow ``need`` uses."""
        return False

    def complete(self, embedding: Embedding, rgb: np.ndarray, need: Capability) -> Embedding:
        """``embedding`` plus what ``need`` uses, encoding only the missing part of ``rgb``."""
        return embedding

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
            From :meth:`encode`.
        points_xy : numpy.ndarray
            ``(N, 2)`` float32 ``(x, y)`` in model-input pixels. A box is two points, top-left then
            bottom-right, placed **before** the clicks.
        labels : numpy.ndarray
            ``(N,)`` int: 1 positive click, 0 negative click, 2 box top-left, 3 box bottom-right.
        mask_input : numpy.ndarray, optional
            ``mask_size`` float32 logits of a previous prediction (clamped to +-32 by the caller).
        """
        role = self.prompt_decoder
        if self._composed(role):
            return role.predict_masks(embedding, points_xy, labels, mask_input)
        raise NotImplementedError

    def predict_point_batch(
        self, embedding: Embedding, points_xy: np.ndarray
    ) -> list[MaskCandidates]:
        """Decode each of several points as its own single positive click.

        Automatic segmentation sends a grid of clicks this way. The default runs
        :meth:`predict_masks` once per point; an adapter whose decoder has a batch axis may
        override it to decode many points in one call (same results).

        Parameters
        ----------
        embedding : Embedding
            From :meth:`encode`.
        points_xy : numpy.ndarray
            ``(B, 2)`` float32 ``(x, y)`` in model-input pixels, one object per point.

        Returns
        -------
        list of MaskCandidates
            One per point, in order.
        """
        one = np.ones(1, np.int64)
        pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
        return [self.predict_masks(embedding, p[None], one) for p in pts]

    def encode_text(self, token_ids: Sequence[int]) -> TextEmbedding:
        """Run the language encoder.

        Parameters
        ----------
        token_ids : Sequence[int]
            CLIP BPE ids including start (49406) and end (49407) tokens, at most
            :attr:`context_length` long; the adapter pads them as its graph expects.
        """
        role = self.concept_detector
        if self._composed(role):
            return role.encode_text(token_ids)
        raise NotImplementedError

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
            From :meth:`encode` and :meth:`encode_text` (use the text ``"visual"`` for
            exemplar-only searches, as SAM 3 does).
        boxes_cxcywh : numpy.ndarray, optional
            ``(K, 4)`` float32 exemplar boxes ``(cx, cy, w, h)`` normalised to [0, 1].
        box_labels : numpy.ndarray, optional
            ``(K,)`` bool or int, 1/True = positive exemplar.
        """
        role = self.concept_detector
        if self._composed(role):
            return role.detect(embedding, text, boxes_cxcywh, box_labels)
        raise NotImplementedError

    # ---- memory path (Capability.MEMORY): a tracked slice is memory_attend, then
    # predict_masks with no points, then memory_encode of the chosen mask --------------------

    #: What the bundle says about the memory bank (None where it says nothing).
    memory_settings: MemorySettings = MemorySettings()

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
        role = self.memory_graphs
        if self._composed(role):
            return role.memory_encode(embedding, mask_logits, object_score, is_mask_from_points)
        raise NotImplementedError

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
            Spatial memories from :meth:`memory_encode`, in upstream order (selected prompted
            slices first, then recent slices oldest to newest); at least one.
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
        role = self.memory_graphs
        if self._composed(role):
            return role.memory_attend(embedding, memories, memory_rows, pointers, pointer_offsets)
        raise NotImplementedError

    def close(self) -> None:
        """Release the sessions (they are re-created lazily on next use)."""


def as_named(outputs: Sequence[np.ndarray], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Zip a session's outputs with the names that were asked for."""
    return dict(zip(names, outputs, strict=True))
