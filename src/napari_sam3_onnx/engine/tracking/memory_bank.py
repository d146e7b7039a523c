"""SAM 3's tracker memory bank in plain numpy: which slices a tracked slice attends to.

One bank per object, keyed by slice index and shared by both propagation directions (so the
backward pass sees the forward pass's memories next to the start slice, as upstream does). The
selection rules are docs/layouts.md#tracked-slices with the stride ``r`` of the
bundle (SAM 3: 1):

* conditioning (prompted) slices are always kept; when more than ``max_cond_frames_in_attn``
  exist, the closest before ``t``, the closest at/after ``t``, then the nearest others are used;
  each gets temporal row ``num_maskmem - 1``;
* recent tracked slices ``t - sign * t_rel`` (``t_rel = 1 .. num_maskmem - 1``) get row
  ``t_rel - 1`` (the previous slice row 0); absent ones are skipped, never padded;
* object pointers: the selected conditioning slices not in the future, at position
  ``|t - t_c|``, then slices ``t - sign * d`` for ``d = 1 .. max_ptrs - 1`` at position ``d``,
  with ``max_ptrs = min(num_slices, max_obj_ptrs)``; the encoder normalises by ``max_ptrs - 1``.

Memory stays bounded by the bank's reach, not the stack length: :meth:`MemoryBank.evict` drops
spatial memories (and, further out, pointers) that no pending selection can reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from napari_sam3_onnx.engine.tracking.memory_select import (
    BankSettings,
    Selection,
    cap_selection,
    closest_conditioning,
)

__all__ = ["BankSettings", "MemoryBank", "Selection"]


@dataclass
class _Entry:
    memory: Any | None
    pointer: np.ndarray
    score: float


def _nbytes(x: Any) -> int:
    return int(getattr(x, "nbytes", 0)) if x is not None else 0


class MemoryBank:
    """Memories of one object over one stack.

    Parameters
    ----------
    settings : BankSettings
        Sizes from the bundle (:meth:`BankSettings.from_adapter`).
    num_slices : int
        Length of the propagation axis (bounds the pointer look-ups and ``max_ptrs``).

    Attributes
    ----------
    peak_memories, peak_pointers, peak_nbytes : int
        Largest number of spatial memories / pointers / bytes held at any time.
    """

    def __init__(self, settings: BankSettings, num_slices: int) -> None:
        self.settings = settings
        self.num_slices = int(num_slices)
        self.cond: dict[int, _Entry] = {}
        self.tracked: dict[int, _Entry] = {}
        self._barriers: list[tuple[int, int]] = []
        self.peak_memories = self.peak_pointers = self.peak_nbytes = 0

    # ---- storage ------------------------------------------------------------------------
    @property
    def max_ptrs(self) -> int:
        """``min(num_slices, max_obj_ptrs)``: pointer window (the encoder divides by it - 1)."""
        return max(1, min(self.num_slices, self.settings.max_obj_ptrs))

    def add(
        self, index: int, memory: Any, pointer: np.ndarray | None, *, conditioning: bool,
        score: float = 0.0,
    ) -> None:
        """Store one slice's memory.

        Parameters
        ----------
        index : int
            Slice index along the propagation axis.
        memory : MemoryFrame
            The memory encoder's output (anything with ``nbytes``; passed back unchanged).
        pointer : numpy.ndarray
            ``(C,)`` float32 object pointer (``None``, from a decoder that gives none, is
            refused: memory tracking needs one per slice).
        conditioning : bool
            A prompted slice (kept for good; replaces any tracked memory of that slice).
        score : float
            ``eff_iou_score`` of the slice (only used with memory selection).
        """
        if pointer is None:
            raise ValueError(f"slice {index}: the decoder gave no object pointer to remember")
        entry = _Entry(memory, np.asarray(pointer, np.float32).reshape(-1), float(score))
        if conditioning:
            self.tracked.pop(index, None)
            self.cond[index] = entry
        else:
            self.tracked[index] = entry
        self._record_peak()

    def correct_at(self, index: int, sign: int) -> None:
        """A pass moving in direction ``sign`` reached the correction (seed) slice ``index``.

        SAM's ``clear_non_cond_mem_around_input``: from here on, that pass does not mix the old
        view of the object with the correction, so its selections beyond ``index`` skip the
        tracked slices within ``num_maskmem * r`` behind it. Unlike upstream's deletion, the
        entries stay for other passes (a backward pass keeps the forward memories at its start).
        """
        self._barriers.append((int(index), int(sign)))

    def _hidden(self, i: int, index: int, sign: int) -> bool:
        reach = self.settings.num_maskmem * self.settings.stride
        return any(s == sign and (index - k) * s > 0 and 0 < (k - i) * s <= reach
                   for k, s in self._barriers)

    @property
    def held_memories(self) -> int:
        """Spatial memories held now."""
        return sum(e.memory is not None for e in (*self.cond.values(), *self.tracked.values()))

    @property
    def held_pointers(self) -> int:
        """Object pointers held now."""
        return sum(e.pointer is not None for e in (*self.cond.values(), *self.tracked.values()))

    @property
    def nbytes(self) -> int:
        """Bytes held by memories and pointers."""
        return sum(_nbytes(e.memory) + _nbytes(e.pointer)
                   for e in (*self.cond.values(), *self.tracked.values()))

    def _record_peak(self) -> None:
        self.peak_memories = max(self.peak_memories, self.held_memories)
        self.peak_pointers = max(self.peak_pointers, self.held_pointers)
        self.peak_nbytes = max(self.peak_nbytes, self.nbytes)

    def bound(self, windows: int) -> tuple[int, int]:
        """Most ``(memories, pointers)`` the bank can hold with ``windows`` pending frontiers.

        Conditioning slices, plus one reach of tracked slices per frontier (the running pass and
        each pass still to start), plus the slice just added before :meth:`evict` runs.
        """
        s = self.settings
        ptr_reach = self.max_ptrs - (0 if s.use_memory_selection else 1)
        mem = len(self.cond) + windows * s.spatial_reach + 1
        ptr = len(self.cond) + windows * max(s.spatial_reach, ptr_reach) + 1
        return mem, ptr

    # ---- selection ----------------------------------------------------------------------
    def _lookup(self, i: int, index: int, sign: int, unselected: dict[int, _Entry]
                ) -> _Entry | None:
        e = self.tracked.get(i)
        if e is not None and self._barriers and self._hidden(i, index, sign):
            e = None
        return e if e is not None else unselected.get(i)

    def _valid(self, index: int, sign: int) -> list[int]:
        """Memory selection (SAM2Long): nearest well-scored tracked slices, farthest first."""
        s, n = self.settings, self.num_slices
        if (sign > 0 and index == 0) or (sign < 0 and index == n - 1):
            return []
        # As upstream, slice 0 is never scanned forward; the last slice is scanned backward.
        scan = range(index - 1, 0, -s.stride) if sign > 0 else range(index + 1, n, s.stride)
        valid: list[int] = []
        for i in scan:
            e = self.tracked.get(i)
            if e is not None and e.score > s.mf_threshold and not self._hidden(i, index, sign):
                valid.insert(0, i)
            if len(valid) >= self.max_ptrs - 1:
                break
        if index - sign not in valid:
            valid.append(index - sign)
        return valid

    def _recent(self, index: int, sign: int, valid: list[int] | None) -> list[tuple[int, int]]:
        """``(slice, row)`` of the recent-slice candidates, oldest first (before look-up)."""
        s, out = self.settings, []
        r = s.stride
        for t_pos in range(1, s.num_maskmem):
            t_rel = s.num_maskmem - t_pos
            if valid is not None:
                if t_rel > len(valid):
                    continue
                prev = valid[-t_rel]
            elif t_rel == 1:
                prev = index - sign
            elif sign > 0:
                prev = ((index - 2) // r) * r - (t_rel - 2) * r
            else:
                prev = -(-(index + 2) // r) * r + (t_rel - 2) * r
            out.append((prev, s.num_maskmem - t_pos - 1))
        return out

    def _pointer_slices(self, index: int, sign: int, valid: list[int] | None) -> list[int]:
        out = []
        for d in range(1, self.max_ptrs):
            if valid is not None:
                if d >= len(valid):
                    break
                out.append(valid[-d])
                continue
            t = index - sign * d
            if t < 0 or t >= self.num_slices:
                break
            out.append(t)
        return out

    def select(self, index: int, sign: int) -> Selection:
        """What tracked slice ``index`` attends to when tracking in direction ``sign`` (+1/-1).

        Raises
        ------
        ValueError
            No conditioning slice is stored yet.
        """
        if not self.cond:
            raise ValueError("the memory bank has no conditioning slice to track from")
        s = self.settings
        chosen, unselected_keys = closest_conditioning(
            index, list(self.cond), s.max_cond_frames_in_attn, s.keep_first_cond_frame)
        unselected = {k: self.cond[k] for k in unselected_keys}
        valid = self._valid(index, sign) if s.use_memory_selection else None
        mem_slices = list(chosen)
        rows = [s.num_maskmem - 1] * len(chosen)
        memories = [self.cond[c].memory for c in chosen]
        for prev, row in self._recent(index, sign, valid):
            e = self._lookup(prev, index, sign, unselected)
            if e is None or e.memory is None:
                continue
            mem_slices.append(prev)
            rows.append(row)
            memories.append(e.memory)
        ptr_slices = [c for c in chosen if (c - index) * sign <= 0]
        positions = [abs(index - c) for c in ptr_slices]
        pointers = [self.cond[c].pointer for c in ptr_slices]
        n_cond_ptr = len(ptr_slices)
        for d, t in enumerate(self._pointer_slices(index, sign, valid), start=1):
            e = self._lookup(t, index, sign, unselected)
            if e is None or e.pointer is None:
                continue
            ptr_slices.append(t)
            positions.append(d)
            pointers.append(e.pointer)
        dim = next(iter(self.cond.values())).pointer.shape[0]
        sel = Selection(
            tuple(mem_slices), tuple(rows), tuple(memories), tuple(ptr_slices), tuple(positions),
            np.stack(pointers).astype(np.float32) if pointers else np.zeros((0, dim), np.float32),
            self.max_ptrs - 1, len(chosen), n_cond_ptr,
        )
        return cap_selection(sel, index, s.max_memories, s.max_pointers)

    # ---- eviction -----------------------------------------------------------------------
    def _reach(self, index: int, sign: int) -> tuple[set[int], set[int]]:
        """Tracked slices a pass tracking ``index`` (then onwards) may use: spatial, pointers."""
        s = self.settings
        if s.use_memory_selection:
            valid = self._valid(index, sign)
            return set(valid[-(s.num_maskmem - 1):]), set(valid)
        spatial = {index - sign * d for d in range(1, s.spatial_reach + 1)}
        return spatial, {index - sign * d for d in range(1, self.max_ptrs)}

    def evict(self, pending: Iterable[tuple[int, int]]) -> int:
        """Drop what no pending selection can reach; returns how many items were dropped.

        Parameters
        ----------
        pending : iterable of (int, int)
            ``(slice, sign)`` of the next slice each running or future pass will track (e.g.
            the running pass's next slice, and ``(start - 1, -1)`` for a backward pass still to
            run from ``start``). A pass only moves away from its ``slice``, so everything it
            will ever select lies within reach of it or of the slices it computes itself.
        """
        keep_mem: set[int] = set()
        keep_ptr: set[int] = set()
        for index, sign in pending:
            m, p = self._reach(index, sign)
            keep_mem |= m
            keep_ptr |= p
        dropped = 0
        for index in list(self.tracked):
            e = self.tracked[index]
            if e.memory is not None and index not in keep_mem:
                e.memory = None
                dropped += 1
            if index not in keep_ptr and index not in keep_mem:
                del self.tracked[index]
                dropped += e.pointer is not None
        return dropped
