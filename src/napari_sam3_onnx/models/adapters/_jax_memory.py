"""The memory-graphs role of the jax-image-tools video bundle (memory encoder + attention).

Contract (docs/layouts.md#jax-video, #video-memory): ``memory_encoder`` takes the raw
top-level feature ``vision_features``, ``pred_masks_high_res [1,1,S,S]`` and ``is_mask_from_pts``
(+ ``object_score_logits`` where declared) and returns ``memory_tokens``/``memory_pos_enc``
``[T,1,C_m]``; ``memory_attention`` takes token sequences: the current feature and its position
encoding ``[T,1,C]``, the spatial memories with their position encodings plus the temporal row
table of ``constants.json`` ``[T k,1,C_m]``, and pointers split into ``C / C_m`` tokens with
their temporal encoding -> ``conditioned_features [1,1,T,C]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..base import Embedding
from ..errors import LayoutMismatchError
from ..memory import MemoryFrame, MemorySettings
from ..runtime import LazySession
from . import _memory as mem
from . import _tracker_util as tu
from ._pointer_pos import PointerEncoding

MEMENC_OUTPUTS = ("memory_tokens", "memory_pos_enc")


@dataclass
class JaxMemory:
    """Memory encoder + memory attention, as a :class:`~..roles.MemoryGraphs`.

    Attributes
    ----------
    encoder, attention : LazySession
        The two memory graphs.
    layout : str
        For messages.
    memory_settings : MemorySettings
        Bank settings (``num_maskmem`` = rows of ``tpos``).
    tpos : numpy.ndarray
        ``(num_maskmem, C_m)`` float32 temporal rows added to each memory's position encoding.
    mask_size : tuple of int
        ``(S, S)`` of the memory encoder's mask input.
    channels : int
        ``C`` of the top-level feature (and of an object pointer).
    grid : tuple of int
        ``(g, g)`` of the top-level feature.
    pointer_encoding : PointerEncoding
        The pointers' temporal encoding (possibly zeros).
    position : callable
        Returns the image-independent position encoding ``pos2`` of the top-level feature.
    """

    encoder: LazySession
    attention: LazySession
    layout: str
    memory_settings: MemorySettings
    tpos: np.ndarray
    mask_size: tuple[int, int]
    channels: int
    grid: tuple[int, int]
    pointer_encoding: PointerEncoding
    position: Callable[[], np.ndarray]

    @property
    def memory_note(self) -> str:
        """Says so when the pointers go without their temporal encoding."""
        if not self.pointer_encoding.is_zeros:
            return ""
        return ("object pointers without their temporal encoding (the bundle ships no "
                "obj_ptr_tpos_proj in constants.json and no pointer_tpos.onnx)")

    def memory_encode(
        self,
        embedding: Embedding,
        mask_logits: np.ndarray,
        object_score: float,
        is_mask_from_points: bool,
    ) -> MemoryFrame:
        """Encode one slice's ``(h, w)`` logits; features and pos_enc are ``(T, C_m)`` tokens."""
        sig = self.encoder.signature
        feeds = {
            "vision_features": embedding.features["feats2"],
            "pred_masks_high_res": tu.mask_for_memory(mask_logits, self.mask_size),
            "is_mask_from_pts": tu.feed_like(sig.input("is_mask_from_pts"),
                                             bool(is_mask_from_points)),
        }
        # an inferred SAM 3 extra (docs/layouts.md#jax-video)
        if "object_score_logits" in sig.input_names:
            feeds["object_score_logits"] = tu.feed_like(sig.input("object_score_logits"),
                                                        object_score)
        out = self.encoder.run(MEMENC_OUTPUTS, feeds)
        cm = out["memory_tokens"].shape[-1]
        return MemoryFrame(out["memory_tokens"].reshape(-1, cm).astype(np.float32),
                           out["memory_pos_enc"].reshape(-1, cm).astype(np.float32))

    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        """Condition ``feats2`` on the bank (token sequences in, NCHW feature out)."""
        rows, ptrs, offs = mem.check_memory_args(memories, memory_rows, pointers, pointer_offsets,
                                              self.memory_settings, self.channels)
        cm = memories[0].features.shape[-1]
        if self.channels % cm:
            raise LayoutMismatchError(self.layout, self.encoder.path.name,
                                      f"{cm}-d memory tokens do not divide {self.channels}-d "
                                      "object pointers")
        pos2 = self.position()
        spatial = np.concatenate([m.features for m in memories])[:, None, :]
        spatial_pos = np.concatenate([m.pos_enc + self.tpos[r] for m, r in
                                      zip(memories, rows, strict=True)])[:, None, :]
        ptr_tokens = ptrs.reshape(-1, 1, cm)  # pointer p -> tokens ptr[j*C_m:(j+1)*C_m]
        # SAM 3: offset / (max_ptrs - 1); the engine scales offsets for this fixed divisor
        norm = max(1, (self.memory_settings.max_obj_ptrs or 16) - 1)
        ptr_pos = self.pointer_encoding.tokens(offs / np.float32(norm))
        out = self.attention.run(["conditioned_features"], {
            "current_vision_features": tu.nchw_to_tokens(embedding.features["feats2"]),
            "current_vision_position_embeddings": (
                pos2 if pos2.ndim == 3 else tu.nchw_to_tokens(pos2)),
            "spatial_memory": spatial.astype(np.float32),
            "spatial_memory_position_embeddings": spatial_pos.astype(np.float32),
            "pointer_memory": ptr_tokens,
            "pointer_memory_position_embeddings": ptr_pos.astype(np.float32),
        })
        fused = tu.tokens_to_nchw(out["conditioned_features"], self.channels, self.grid)
        return mem.conditioned(embedding, fused)
