"""Values the memory graphs pass around (SAM's video memory), shared by adapters and engine.

A :class:`MemoryFrame` holds one slice's memory-encoder output in the layout's own shape and is
handed back, unchanged, to the same adapter's ``memory_attend``; :class:`MemorySettings` is what
a bundle publishes about its bank (docs/layouts.md#bank-settings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Key of :attr:`Embedding.features` holding a memory-conditioned top-level feature
#: ``(1, C, g, g)`` float32. ``predict_masks`` feeds it to the decoder as it is; without it the
#: decoder gets the raw feature plus ``no_mem_embed`` (SAM 3's prompted-slice path).
CONDITIONED = "memory_conditioned"


@dataclass(frozen=True)
class MemoryFrame:
    """One slice's memory, as the memory encoder returned it.

    Attributes
    ----------
    features : numpy.ndarray
        float32 memory features in the layout's shape: ``(C_m, g, g)`` for the pagarcia layout,
        ``(T, C_m)`` tokens for the jax-video layout (SAM 3: ``C_m`` = 64, ``g`` = 72,
        ``T`` = 5184).
    pos_enc : numpy.ndarray
        float32 positional encoding of the same shape (constant across slices).
    """

    features: np.ndarray
    pos_enc: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held (what a bank entry costs)."""
        return int(self.features.nbytes + self.pos_enc.nbytes)


@dataclass(frozen=True)
class MemorySettings:
    """Memory-bank parameters a bundle publishes (None: the bundle does not say).

    Attributes
    ----------
    num_maskmem : int or None
        Temporal rows of ``maskmem_tpos_enc`` (SAM 3: 7; row ``num_maskmem - 1`` = prompted slice,
        row 0 = the previous slice).
    max_obj_ptrs : int or None
        Object pointers the model was trained with (SAM 3: 16).
    max_cond_frames_in_attn, keep_first_cond_frame, memory_temporal_stride_for_eval,
    use_memory_selection, mf_threshold
        SAM 3 tracker settings, where the bundle ships them.
    max_memories : int or None
        Spatial memories one ``memory_attend`` call accepts (a static graph dimension); None =
        any number.
    max_pointers : int or None
        Object pointers one call accepts; None = any number.
    """

    num_maskmem: int | None = None
    max_obj_ptrs: int | None = None
    max_cond_frames_in_attn: int | None = None
    keep_first_cond_frame: bool | None = None
    memory_temporal_stride_for_eval: int | None = None
    use_memory_selection: bool | None = None
    mf_threshold: float | None = None
    max_memories: int | None = None
    max_pointers: int | None = None
