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
from pathlib import Path
from typing import Literal

import numpy as np

from .encoder_kind import describe
from .errors import MissingCapabilityError
from .graph_info import GraphSignature
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
    """Base class of the per-layout adapters: an image encoder composed with optional roles.

    The adapter itself is the image encoder (:meth:`encode` and the geometry). The other roles
    (:mod:`napari_sam3_onnx.models.roles`) are objects it composes: a prompt decoder, a concept
    detector and memory graphs, attached with :meth:`_attach_prompt_decoder`,
    :meth:`_attach_detector` and :meth:`_attach_memory`. A capability means "the role exists":
    :attr:`capabilities` is derived from the attached roles, and the accessors
    :attr:`prompt_decoder`, :attr:`concept_detector` and :attr:`memory_graphs` return the role or
    raise :class:`~napari_sam3_onnx.models.errors.MissingCapabilityError` naming the bundle and
    the missing ability.
    """

    layout: str = "unknown"
    #: Weight precision the bundle declares (its manifest), e.g. "fp32" or "int8 (dynamic) in
    #: image_encoder, language_encoder; fp32 elsewhere"; None when it declares none.
    precision: str | None = None

    #: Composed role objects (None: the bundle lacks that role).
    _prompt_role: PromptDecoder | None = None
    _detector_role: ConceptDetector | None = None
    _memory_role: MemoryGraphs | None = None
    #: Whether the attached detector takes exemplar boxes.
    _exemplars: bool = False

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Assign a folder's graphs to this layout's roles, or return None if they do not fit."""
        return None

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this bundle can do: encoding, plus what each attached role brings."""
        caps = {Capability.ENCODE}
        if self._prompt_role is not None:
            caps |= {Capability.CLICKS, Capability.BOXES}
        if self._detector_role is not None:
            caps.add(Capability.TEXT)
            if self._exemplars:  # the detector answers a box as a positive exemplar
                caps |= {Capability.EXEMPLARS, Capability.BOXES}
        if self._memory_role is not None:
            caps.add(Capability.MEMORY)
        return frozenset(caps)

    # ---- geometry, read from the graphs -------------------------------------------------
    @property
    def input_size(self) -> tuple[int, int]:
        """``(height, width)`` of the encoder input."""
        raise NotImplementedError

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of the low-resolution masks (and of a mask prompt)."""
        raise NotImplementedError

    def assumptions(self) -> dict[str, tuple[str, str]]:
        """What this adapter assumed or learnt for its folder: ``name -> (value, source)``.

        Names include ``padding`` (who appends SAM's padding point), ``pointer encoding``,
        ``no-memory embedding``, ``normalisation``, ``mask kind`` and ``score cut``; ``source`` is
        the graph or file that said so, or the layout contract when nothing in the bundle does.
        """
        return {}

    @property
    def encoder_kind(self) -> str | None:
        """What the image encoder is when it is a student (e.g. EfficientSAM3), else None.

        Read from the encoder graph's file name and initializer shapes
        (:func:`~napari_sam3_onnx.models.encoder_kind.describe`); SAM 3's own ViT gives None.
        """
        path = getattr(getattr(self, "encoder", None), "path", None)
        return describe(path) if isinstance(path, Path) else None

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
        if self._prompt_role is None:
            raise MissingCapabilityError(self.layout, Capability.CLICKS.value)
        return self._prompt_role

    @property
    def concept_detector(self) -> ConceptDetector:
        """The concept detector with its language encoder (text and exemplar search).

        Raises
        ------
        MissingCapabilityError
            The bundle has no concept detector (capability ``text``).
        """
        if self._detector_role is None:
            raise MissingCapabilityError(self.layout, Capability.TEXT.value)
        return self._detector_role

    @property
    def memory_graphs(self) -> MemoryGraphs:
        """The memory encoder and memory attention (propagation with memory).

        Raises
        ------
        MissingCapabilityError
            The bundle has no memory graphs (capability ``memory``).
        """
        if self._memory_role is None:
            raise MissingCapabilityError(self.layout, Capability.MEMORY.value)
        return self._memory_role

    def _attach_prompt_decoder(self, role: PromptDecoder) -> None:
        """Compose ``role`` as the prompt decoder; the bundle gains clicks and boxes."""
        self._prompt_role = role

    def _attach_detector(self, role: ConceptDetector, exemplars: bool) -> None:
        """Compose ``role`` as the detector; text, plus exemplars and boxes if it has slots."""
        self._detector_role = role
        self._exemplars = exemplars

    def _attach_memory(self, role: MemoryGraphs) -> None:
        """Compose ``role`` as the memory graphs; the bundle gains memory."""
        self._memory_role = role

    # ---- the image encoder -------------------------------------------------------------
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

    def close(self) -> None:
        """Release the sessions (they are re-created lazily on next use)."""


def as_named(outputs: Sequence[np.ndarray], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Zip a session's outputs with the names that were asked for."""
    return dict(zip(names, outputs, strict=True))
