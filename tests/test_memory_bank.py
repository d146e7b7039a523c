"""The memory bank's selection rules (docs/layouts.md#tracked-slices) and its memory bound."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from napari_sam3_onnx.engine.tracking.memory_bank import BankSettings, MemoryBank
from napari_sam3_onnx.engine.tracking.memory_select import SAM3_DEFAULTS, closest_conditioning

SAM3 = BankSettings()
PTR_DIM = 8


class FakeMemory:
    """Stands in for a MemoryFrame: remembers its slice, costs ``nbytes``."""

    def __init__(self, index, nbytes=1000):
        self.index, self.nbytes = index, nbytes


def _add(bank, index, cond=False, score=0.9):
    bank.add(index, FakeMemory(index), np.full(PTR_DIM, index, np.float32), conditioning=cond,
             score=score)


def _check_pointers(sel):
    """Each pointer row is the pointer stored for its slice (the fake pointer = slice index)."""
    assert sel.pointers.shape == (len(sel.pointer_slices), PTR_DIM)
    assert sel.pointers[:, 0].tolist() == list(sel.pointer_slices)
    assert [m.index for m in sel.memories] == list(sel.memory_slices)


def test_worked_example_prompt_on_frame_0_of_100():
    bank = MemoryBank(SAM3, 100)
    _add(bank, 0, cond=True)
    seen = {}
    for t in range(1, 9):
        seen[t] = bank.select(t, +1)
        _add(bank, t)
    one = seen[1]
    assert one.memory_slices == (0,) and one.memory_rows == (6,)
    assert one.pointer_slices == (0,) and one.pointer_positions == (1,)
    assert one.pointer_norm == 15
    eight = seen[8]
    assert eight.memory_slices == (0, 2, 3, 4, 5, 6, 7)
    assert eight.memory_rows == (6, 5, 4, 3, 2, 1, 0)
    assert eight.pointer_slices == (0, 7, 6, 5, 4, 3, 2, 1)
    assert eight.pointer_positions == (8, 1, 2, 3, 4, 5, 6, 7)
    for sel in seen.values():
        _check_pointers(sel)


def test_reverse_direction_from_the_last_slice():
    bank = MemoryBank(SAM3, 100)
    _add(bank, 99, cond=True)
    for t in range(98, 90, -1):
        _add(bank, t)
    sel = bank.select(90, -1)
    assert sel.memory_slices == (99, 96, 95, 94, 93, 92, 91)
    assert sel.memory_rows == (6, 5, 4, 3, 2, 1, 0)
    # the cond slice (not in the future going backward) at |90 - 99|; then 91..98, bounded by
    # the stack end; 99 itself is a selected cond slice, not looked up again
    assert sel.pointer_slices == (99, 91, 92, 93, 94, 95, 96, 97, 98)
    assert sel.pointer_positions == (9, 1, 2, 3, 4, 5, 6, 7, 8)
    _check_pointers(sel)


def test_short_stack_normalises_pointers_by_its_length():
    bank = MemoryBank(SAM3, 7)
    _add(bank, 3, cond=True)
    assert bank.select(4, +1).pointer_norm == 6
    assert bank.max_ptrs == 7


def test_more_than_four_conditioning_slices():
    bank = MemoryBank(SAM3, 40)
    for c in (15, 17, 19, 20, 22):
        _add(bank, c, cond=True)
    for t in (16, 18):
        _add(bank, t)
    sel = bank.select(21, +1)
    # before 20, at/after 22, then nearest 19 and 17; 15 is unselected
    assert sel.memory_slices[:4] == (20, 22, 19, 17)
    assert sel.memory_rows[:4] == (6, 6, 6, 6)
    # recent: 20 and 19 and 17 are selected cond slices (skipped), 15 is an unselected cond
    # slice used as a recent memory with its row, 18 / 16 are tracked
    assert sel.memory_slices[4:] == (15, 16, 18)
    assert sel.memory_rows[4:] == (5, 4, 2)
    # pointers: selected cond slices not in the future (22 is), then t - d
    assert sel.pointer_slices == (20, 19, 17, 18, 16, 15)
    assert sel.pointer_positions == (1, 2, 4, 3, 5, 6)
    _check_pointers(sel)


def test_closest_conditioning_variants():
    assert closest_conditioning(5, [9, 2], 4) == ([2, 9], [])  # nearest first
    assert closest_conditioning(5, [1, 2, 3, 9, 30], 3) == ([3, 9, 2], [1, 30])
    assert closest_conditioning(9, [1, 2, 3, 9, 30], 3) == ([3, 9, 2], [1, 30])  # 9 is "at"
    assert closest_conditioning(5, [1, 2, 3, 9, 30], 3, keep_first=True) == ([1, 3, 9], [2, 30])
    assert closest_conditioning(5, [9, 1, 2], -1) == ([2, 1, 9], [])


def test_memory_selection_skips_badly_scored_slices():
    bank = MemoryBank(replace(SAM3, use_memory_selection=True), 100)
    _add(bank, 0, cond=True)
    for t in range(1, 11):
        _add(bank, t, score=0.0 if t in (5, 8) else 0.5)
    sel = bank.select(11, +1)
    assert sel.memory_slices == (0, 3, 4, 6, 7, 9, 10)
    assert sel.memory_rows == (6, 5, 4, 3, 2, 1, 0)
    # valid = 1 2 3 4 6 7 9 10: pointers valid[-1..-7] at ordinal positions
    assert sel.pointer_slices == (0, 10, 9, 7, 6, 4, 3, 2)
    assert sel.pointer_positions == (11, 1, 2, 3, 4, 5, 6, 7)


def test_static_graph_limits_keep_the_nearest_cond_and_the_previous_slice():
    bank = MemoryBank(replace(SAM3, max_memories=2, max_pointers=3), 50)
    for c in (0, 10):
        _add(bank, c, cond=True)
    for t in range(11, 20):
        _add(bank, t)
    sel = bank.select(20, +1)
    assert sel.memory_slices == (10, 19) and sel.memory_rows == (6, 0)
    assert sel.pointer_slices == (10, 0, 19)  # cond pointers first, then the nearest
    assert sel.pointer_positions == (10, 20, 1)
    _check_pointers(sel)


def test_settings_from_a_bundle_and_defaults():
    published = SimpleNamespace(num_maskmem=5, max_obj_ptrs=None, max_memories=2,
                                memory_temporal_stride_for_eval=1)  # like MemorySettings
    s = BankSettings.from_memory_settings(published)
    assert (s.num_maskmem, s.stride, s.max_memories) == (5, 1, 2)
    assert s.max_obj_ptrs == SAM3_DEFAULTS["max_obj_ptrs"]
    assert "max_obj_ptrs" in s.defaulted and "num_maskmem" not in s.defaulted
    assert BankSettings.from_memory_settings(None).defaulted == tuple(SAM3_DEFAULTS)


def _simulate(n, cond, evict):
    """Forward then backward from ``cond`` like propagate(); returns the bank and selections."""
    bank = MemoryBank(SAM3, n)
    _add(bank, cond, cond=True)
    selections, windows = {}, []
    for sign, span in ((1, range(cond + 1, n)), (-1, range(cond - 1, -1, -1))):
        for t in span:
            selections[t, sign] = bank.select(t, sign)
            _add(bank, t)
            if evict:
                pending = [(t + sign, sign)] + ([(cond - 1, -1)] if sign > 0 else [])
                windows.append(len(pending))
                bank.evict(pending)
    return bank, selections, max(windows, default=0)


def test_backward_pass_reuses_forward_memories_next_to_the_start():
    _, sel, _ = _simulate(200, 50, evict=True)
    back = sel[49, -1]
    assert back.memory_slices == (50, 55, 54, 53, 52, 51)
    assert back.memory_rows == (6, 5, 4, 3, 2, 1)
    assert back.pointer_slices == (50, *range(51, 65))
    assert back.pointer_positions == tuple(range(1, 16))
    assert sel[48, -1].memory_slices == (50, 54, 53, 52, 51, 49)


def test_eviction_changes_no_selection_and_bounds_the_bank():
    n = 200
    kept, with_evict, windows = _simulate(n, 100, evict=True)
    full, without, _ = _simulate(n, 100, evict=False)
    assert with_evict.keys() == without.keys()
    for key in without:
        a, b = with_evict[key], without[key]
        assert (a.memory_slices, a.memory_rows) == (b.memory_slices, b.memory_rows), key
        assert (a.pointer_slices, a.pointer_positions) == (b.pointer_slices, b.pointer_positions)
    mem_bound, ptr_bound = kept.bound(windows)
    assert kept.peak_memories <= mem_bound < 20
    assert kept.peak_pointers <= ptr_bound < 40
    assert full.held_memories == n  # without eviction everything stays
    assert kept.peak_nbytes <= mem_bound * 1000 + ptr_bound * PTR_DIM * 4
    assert kept.peak_nbytes < full.nbytes / 5


def test_select_without_a_conditioning_slice_is_refused():
    with pytest.raises(ValueError, match="conditioning"):
        MemoryBank(SAM3, 10).select(3, 1)


def test_a_correction_hides_the_old_track_behind_it_for_that_pass_only():
    bank = MemoryBank(SAM3, 30)
    _add(bank, 0, cond=True)
    for t in range(1, 10):
        _add(bank, t)
    _add(bank, 10, cond=True)
    bank.correct_at(10, +1)
    sel = bank.select(11, +1)
    assert sel.memory_slices == (10, 0)  # 9..5 were the old view: skipped, not padded
    assert sel.pointer_slices == (10, 0, 2, 1)
    assert sel.pointer_positions == (1, 11, 9, 10)
    assert bank.select(9, +1).memory_slices[-1] == 8  # before the correction: unchanged
    back = bank.select(2, -1)  # another pass still sees them
    assert back.memory_slices == (0, 10, 8, 7, 6, 5, 4, 3)


def test_a_slice_without_an_object_pointer_is_refused_by_name():
    bank = MemoryBank(SAM3, 9)
    with pytest.raises(ValueError, match="slice 4: the decoder gave no object pointer"):
        bank.add(4, FakeMemory(4), None, conditioning=True)
    assert bank.held_pointers == 0 and not bank.cond
