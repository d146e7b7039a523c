"""The memory-graphs role of the pagarcia tracker bundle (memory encoder + memory attention).

Contract (docs/layouts.md#pagarcia-tracker): ``memory_encoder_*`` takes
``pred_mask_high_res [1,1,S,S]`` logits, the raw top-level feature, ``object_score_logits`` and
``is_mask_from_points`` and returns ``maskmem_features``/``maskmem_pos_enc`` ``[1,C_m,g,g]``;
``memory_attention_*`` takes the raw feature, its position embedding ``[g*g,1,C]`` (from the
bundle's constants), object pointers with raw slice distances and the spatial memories with their
temporal rows, and returns ``fused_feat [1,C,g,g]``. Static memory sizes are zero-filled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..base import Embedding
from ..memory import MemoryFrame, MemorySettings
from ..runtime import LazySession
from . import _memory as mem
from . import _tracker_util as tu

MEMENC_OUTPUTS = ("maskmem_features", "maskmem_pos_enc")


@dataclass
class PagarciaMemory:
    """Memory encoder + memory attention, as a :class:`~..roles.MemoryGraphs`.

    Attributes
    ----------
    encoder, attention : LazySession
        The memory encoder and the memory attention.
    feature : str
        The embedding key of the raw top-level feature (``image_embeddings.2``).
    memory_settings : MemorySettings
        The bank settings from the bundle's constants and the graphs' static sizes.
    pos_embed : numpy.ndarray
        ``(g*g, 1, C)`` float32 position embedding of the current slice's feature.
    pointer_dim : int
        Channels of one object pointer.
    mask_size : tuple of int
        ``(S, S)`` of the memory encoder's mask input.
    memory_note : str
        No caveat for this bundle.
    """

    encoder: LazySession
    attention: LazySession
    feature: str
    memory_settings: MemorySettings
    pos_embed: np.ndarray
    pointer_dim: int
    mask_size: tuple[int, int]
    memory_note: str = ""

    def memory_encode(
        self,
        embedding: Embedding,
        mask_logits: np.ndarray,
        object_score: float,
        is_mask_from_points: bool,
    ) -> MemoryFrame:
        """Encode one slice's ``(h, w)`` logits; features and pos_enc are ``(C_m, g, g)``."""
        sig = self.encoder.signature
        out = self.encoder.run(MEMENC_OUTPUTS, {
            "pred_mask_high_res": tu.mask_for_memory(mask_logits, self.mask_size),
            "current_vision_feat": embedding.features[self.feature],
            "object_score_logits": tu.feed_like(sig.input("object_score_logits"), object_score),
            "is_mask_from_points": tu.feed_like(sig.input("is_mask_from_points"),
                                                bool(is_mask_from_points)),
        })
        return MemoryFrame(out["maskmem_features"][0].astype(np.float32),
                           out["maskmem_pos_enc"][0].astype(np.float32))

    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        """Condition the raw feature on the bank; offsets are raw distances (graph normalises)."""
        rows, ptrs, offs = mem.check_memory_args(memories, memory_rows, pointers,
                                                 pointer_offsets, self.memory_settings,
                                                 self.pointer_dim)
        feats = np.stack([m.features for m in memories]).astype(np.float32)
        pos = np.stack([m.pos_enc for m in memories]).astype(np.float32)
        s = self.memory_settings
        feats, pos, rows = (mem.zero_fill(a, s.max_memories) for a in (feats, pos, rows))
        ptrs, offs = (mem.zero_fill(a, s.max_pointers) for a in (ptrs, offs))
        out = self.attention.run(["fused_feat"], {
            "current_vision_feat": embedding.features[self.feature],
            "current_vision_pos_embed": self.pos_embed, "memory_obj_ptrs": ptrs,
            "memory_obj_tpos": offs, "memory_mask_feats": feats, "memory_mask_pos": pos,
            "memory_mask_tpos_idx": rows,
        })
        return mem.conditioned(embedding, out["fused_feat"].astype(np.float32))
