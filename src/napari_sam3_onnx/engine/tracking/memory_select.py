"""Memory-bank settings, one slice's selection, and the rules that do not need the bank.

See :mod:`napari_sam3_onnx.engine.tracking.memory_bank` and docs/layouts.md#video-memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from napari_sam3_onnx.models.base import SamAdapter

#: SAM 3's tracker values (``build_tracker``; docs/layouts.md#bank-settings), used only for the
#: settings a bundle does not publish. ``use_memory_selection`` is True in SAM 3's concept-video
#: model but False in the interactive tracker; a bundle that says nothing gets the plain
#: tracked-slice rules.
SAM3_DEFAULTS: dict[str, Any] = {
    "num_maskmem": 7,
    "max_obj_ptrs": 16,
    "max_cond_frames_in_attn": 4,
    "keep_first_cond_frame": False,
    "stride": 1,
    "use_memory_selection": False,
    "mf_threshold": 0.01,
}


@dataclass(frozen=True)
class BankSettings:
    """Sizes and switches of the memory bank.

    Attributes
    ----------
    num_maskmem : int
        Temporal rows (conditioning slices use row ``num_maskmem - 1``, the previous slice 0).
    max_obj_ptrs : int
        Pointer window the model was trained with (``max_ptrs = min(num_slices, this)``).
    max_cond_frames_in_attn : int
        Conditioning slices one selection may use (-1: all).
    keep_first_cond_frame : bool
        Always select the earliest conditioning slice (SAM 3: False).
    stride : int
        ``memory_temporal_stride_for_eval`` r (SAM 3: 1).
    use_memory_selection, mf_threshold
        SAM2Long-style selection of well-scored recent slices (docs/layouts.md#tracked-slices,
        step 6).
    max_memories, max_pointers : int or None
        Static limits of the bundle's memory-attention graph (None: any number).
    defaulted : tuple of str
        Settings the bundle did not publish, filled from :data:`SAM3_DEFAULTS`.
    """

    num_maskmem: int = 7
    max_obj_ptrs: int = 16
    max_cond_frames_in_attn: int = 4
    keep_first_cond_frame: bool = False
    stride: int = 1
    use_memory_selection: bool = False
    mf_threshold: float = 0.01
    max_memories: int | None = None
    max_pointers: int | None = None
    defaulted: tuple[str, ...] = ()

    @property
    def spatial_reach(self) -> int:
        """Farthest slice distance a recent-slice memory is looked up at."""
        return (self.num_maskmem - 1) * self.stride

    @classmethod
    def from_memory_settings(cls, ms: Any | None) -> BankSettings:
        """From an adapter's ``memory_settings`` (a ``MemorySettings``; None fields defaulted)."""
        names = {f.name for f in fields(cls)}
        given = {} if ms is None else {
            ("stride" if k == "memory_temporal_stride_for_eval" else k): v
            for k, v in vars(ms).items()
        }
        values: dict[str, Any] = {}
        defaulted = []
        for key, default in SAM3_DEFAULTS.items():
            v = given.get(key)
            if v is None:
                defaulted.append(key)
                v = default
            values[key] = type(default)(v)
        for key in ("max_memories", "max_pointers"):
            values[key] = given.get(key)
        assert set(values) <= names
        return cls(**values, defaulted=tuple(defaulted))

    @classmethod
    def from_adapter(cls, adapter: SamAdapter) -> BankSettings:
        """The bank settings of a memory-capable adapter (its memory graphs' settings)."""
        return cls.from_memory_settings(adapter.memory_graphs.memory_settings)


@dataclass(frozen=True)
class Selection:
    """What one tracked slice attends to (the arguments of ``memory_graphs.memory_attend``).

    Attributes
    ----------
    memory_slices : tuple of int
        Slice of each spatial memory: selected conditioning slices, then recent slices oldest
        first.
    memory_rows : tuple of int
        Temporal row of each (``num_maskmem - 1`` conditioning, 0 the previous slice).
    memories : tuple
        The stored ``MemoryFrame`` objects, in that order.
    pointer_slices : tuple of int
        Slice of each object pointer: conditioning slices not in the future, then recent slices
        nearest first.
    pointer_positions : tuple of int
        Temporal position of each pointer (slice distance; ordinal under memory selection).
    pointers : numpy.ndarray
        ``(P, C)`` float32 object pointers.
    pointer_norm : int
        ``max_ptrs - 1``: SAM 3 encodes ``position / pointer_norm``.
    n_cond_memories, n_cond_pointers : int
        How many leading memories / pointers come from conditioning slices.
    """

    memory_slices: tuple[int, ...]
    memory_rows: tuple[int, ...]
    memories: tuple[Any, ...]
    pointer_slices: tuple[int, ...]
    pointer_positions: tuple[int, ...]
    pointers: np.ndarray
    pointer_norm: int
    n_cond_memories: int = 0
    n_cond_pointers: int = 0


def closest_conditioning(
    index: int, cond: Sequence[int], limit: int, keep_first: bool = False
) -> tuple[list[int], list[int]]:
    """Split conditioning slices into (selected, unselected) for slice ``index``.

    All when there are at most ``limit`` (or ``limit == -1``), nearest first (upstream keeps
    its insertion order; attention does not depend on the order, but a graph with fewer memory
    slots than selected slices keeps the first ones). Otherwise, as upstream, the closest
    before ``index``, the closest at/after it, then the nearest others (ties in stored order)
    until ``limit`` (docs/layouts.md#tracked-slices, step 1).
    """
    cond = list(cond)
    if limit == -1 or len(cond) <= limit:
        return sorted(cond, key=lambda t: (abs(t - index), t)), []
    chosen: list[int] = []
    before = [t for t in cond if t < index]
    after = [t for t in cond if t >= index]
    later = [t for t in cond if t > index]
    if keep_first and (before or later):
        chosen.append(min(before) if before else max(later))  # upstream: max if tracking back
    for pick in ((max(before) if before else None), (min(after) if after else None)):
        if pick is not None and pick not in chosen:
            chosen.append(pick)
    rest = sorted((t for t in cond if t not in chosen), key=lambda t: abs(t - index))
    chosen += rest[: max(0, limit - len(chosen))]
    return chosen, [t for t in cond if t not in chosen]


def cap_selection(
    sel: Selection, index: int, max_memories: int | None, max_pointers: int | None
) -> Selection:
    """Trim a selection to a static graph's limits (SAM 3 itself has none).

    Spatial memories keep, in priority: the nearest conditioning slice, the previous slice,
    the other conditioning slices by distance, then recent slices newest first. Pointers keep
    conditioning slices first, then the nearest. Kept items stay in their original order.
    """
    def keep(order: list[int], n: int) -> list[int]:
        return sorted(order[:n])

    out = sel
    n_mem, n_cm = len(sel.memory_slices), sel.n_cond_memories
    if max_memories is not None and n_mem > max_memories:
        cond = sorted(range(n_cm), key=lambda i: abs(sel.memory_slices[i] - index))
        recent = sorted(range(n_cm, n_mem), key=lambda i: sel.memory_rows[i])
        idx = keep(cond[:1] + recent[:1] + cond[1:] + recent[1:], max_memories)
        out = replace(out, memory_slices=tuple(sel.memory_slices[i] for i in idx),
                      memory_rows=tuple(sel.memory_rows[i] for i in idx),
                      memories=tuple(sel.memories[i] for i in idx),
                      n_cond_memories=sum(i < n_cm for i in idx))
    n_ptr, n_cp = len(sel.pointer_slices), sel.n_cond_pointers
    if max_pointers is not None and n_ptr > max_pointers:
        cond = sorted(range(n_cp), key=lambda i: sel.pointer_positions[i])
        idx = keep(cond + list(range(n_cp, n_ptr)), max_pointers)
        out = replace(out, pointer_slices=tuple(sel.pointer_slices[i] for i in idx),
                      pointer_positions=tuple(sel.pointer_positions[i] for i in idx),
                      pointers=sel.pointers[idx], n_cond_pointers=sum(i < n_cp for i in idx))
    return out
