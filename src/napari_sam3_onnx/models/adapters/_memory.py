"""What the two video-memory adapters (pagarcia tracker, jax-image-tools video) share.

The memory bank itself (which slices are remembered, their temporal rows, pointer offsets:
docs/layouts.md#video-memory) is the engine's job; these adapters only run the graphs.
Everything here is layout-neutral: a :class:`MemoryFrame` holds the memory encoder's output in the
layout's own shape and is handed back, unchanged, to the same adapter's ``memory_attend``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..base import Embedding
from ..memory import CONDITIONED, MemoryFrame, MemorySettings

#: Bank settings a bundle may ship, by the name the upstream tracker (and pagarcia) uses.
SETTINGS_KEYS = ("num_maskmem", "max_obj_ptrs", "max_cond_frames_in_attn",
                 "keep_first_cond_frame", "memory_temporal_stride_for_eval",
                 "use_memory_selection", "mf_threshold")


def settings_from(consts: Mapping[str, object], **graph_limits: int | None) -> MemorySettings:
    """:class:`MemorySettings` from a bundle's constants (scalars or one-element arrays)."""
    values: dict[str, Any] = {}  # scalars .item() gave: int, float or bool
    for key in SETTINGS_KEYS:
        if key in consts:
            v = np.asarray(consts[key]).reshape(-1)[0].item()
            values[key] = bool(v) if key in ("keep_first_cond_frame",
                                             "use_memory_selection") else v
    values.update(graph_limits)
    return MemorySettings(**values)


def zero_fill(a: np.ndarray, rows: int | None) -> np.ndarray:
    """Pad axis 0 with zeros to ``rows`` (a static graph dimension); unchanged when None."""
    if rows is None or len(a) == rows:
        return np.ascontiguousarray(a)
    pad = np.zeros((rows - len(a), *a.shape[1:]), a.dtype)
    return np.ascontiguousarray(np.concatenate([a, pad]))


def conditioned(embedding: Embedding, feature: np.ndarray) -> Embedding:
    """A copy of ``embedding`` whose decoder input is the memory-conditioned ``feature``."""
    feats: Mapping[str, np.ndarray] = {**embedding.features, CONDITIONED: feature}
    return Embedding(feats, embedding.input_size, embedding.image_shape)


def check_memory_args(
    memories: Sequence[MemoryFrame],
    rows: Sequence[int],
    pointers: np.ndarray,
    offsets: Sequence[float],
    settings: MemorySettings,
    pointer_dim: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``memory_attend`` arguments; returns rows (int64), pointers, offsets (float32)."""
    rows_a = np.asarray(rows, np.int64).reshape(-1)
    ptrs = np.asarray(pointers, np.float32).reshape(-1, pointer_dim)
    offs = np.asarray(offsets, np.float32).reshape(-1)
    if not memories:
        raise ValueError("memory attention needs at least one memory (the prompted slice's)")
    if len(rows_a) != len(memories):
        raise ValueError(f"{len(memories)} memories but {len(rows_a)} temporal rows")
    if len(offs) != len(ptrs):
        raise ValueError(f"{len(ptrs)} object pointers but {len(offs)} offsets")
    n_rows = settings.num_maskmem
    if n_rows is not None and ((rows_a < 0) | (rows_a >= n_rows)).any():
        raise ValueError(f"temporal rows must lie in 0..{n_rows - 1}, got {rows_a.tolist()}")
    for what, n, cap in (("memories", len(memories), settings.max_memories),
                         ("object pointers", len(ptrs), settings.max_pointers)):
        if cap is not None and n > cap:
            raise ValueError(f"this bundle's memory attention takes at most {cap} {what}, got {n}")
    return rows_a, ptrs, offs
