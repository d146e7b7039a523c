"""The one protocol every SAM 3 ONNX layout adapter speaks, and the values it passes around.

Coordinates at this level are **model-input pixels**: ``x`` along the columns and ``y`` along the
rows of the resized ``input_size`` image, with ``(0, 0)`` the top-left pixel's top-left corner
(SAM adds the half-pixel offset inside its prompt encoder, so callers pass plain pixel positions).
The engine converts from slice ``(row, col)`` coordinates; adapters never see the original image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .encoder_kind import describe
from .errors import MissingCapabilityError
from .graph_info import GraphSignature
from .roles import ConceptDetector, MemoryGraphs, PromptDecoder
from .values import Capability, Detections, Embedding, MaskCandidates, MaskKind, TextEmbedding

#: The values live in :mod:`.values`; they stay importable from here.
__all__ = ["Capability", "Detections", "Embedding", "MaskCandidates", "MaskKind", "SamAdapter",
           "TextEmbedding", "as_named"]


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

    def encoder_variant(self, need: Capability | None) -> str | None:
        """The image encoder serving ``need`` when the bundle has one per precision, else None.

        A per-workflow bundle (:mod:`~napari_sam3_onnx.models.workflow_precision`) names the
        encoder file; None is the bundle's default encoder. Part of every embedding's cache
        key, so an int8 embedding is never served to a workflow that runs fp32.
        """
        return None

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
