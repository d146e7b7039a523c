"""The one undoable labels writer and the commit log, on napari Labels layers without a viewer.

One write is one undo step; without overwrite, pixels of other objects are kept and reported;
a live run becomes one undo step that leaves the user's later paint alone; the commit log drops
an undone commit's entry, brings a redone one back and forgets it after a new commit.
"""

from __future__ import annotations

import numpy as np
from napari.layers import Labels

from napari_sam3_onnx._napari import commit_log
from napari_sam3_onnx._napari.labels_writer import LiveWrite, plane_indices, write_planes
from napari_sam3_onnx.engine.labels_merge import apply, new_objects, propagated

SHAPE = (3, 20, 30)  # asymmetric planes


def _layer():
    data = np.zeros(SHAPE, np.int32)
    data[1, 2:6, 3:9] = 7  # the user's object
    return Labels(data)


def test_write_planes_keeps_other_objects_says_so_and_undoes_in_one_step():
    layer = _layer()
    before = layer.data.copy()
    values = np.zeros(SHAPE[1:], np.int64)
    values[4:10, 5:20] = 8
    done = write_planes(layer, [((1,), values, None), ((2,), values, None)])
    assert done.skipped == {(1,): {7}} and "(id 7) on 1 slice(s)" in done.note()
    assert (layer.data[1, 2:6, 3:9] == 7).all()  # kept
    assert done.count((1,), 8) == int((values > 0).sum() - ((values > 0) & (before[1] == 7)).sum())
    assert done.count((2,), 8) == int((values > 0).sum())
    np.testing.assert_array_equal(layer.data[1], apply(before[1], values))  # the shared rule
    layer.undo()
    np.testing.assert_array_equal(layer.data, before)
    layer.redo()
    assert (layer.data[2] == np.where(values > 0, 8, 0)).all()


def test_overwrite_replaces_and_nothing_is_skipped():
    layer = _layer()
    values = np.zeros(SHAPE[1:], np.int64)
    values[2:4, 3:5] = 9
    done = write_planes(layer, [((1,), values, None)], overwrite=True)
    assert not done.skipped and not done.note() and (layer.data[1, 2:4, 3:5] == 9).all()


def test_new_objects_earlier_masks_win_and_background_only():
    current = np.zeros(SHAPE[1:], np.int32)
    current[0:3, 0:3] = 5
    a = np.zeros(SHAPE[1:], bool)
    a[0:6, 0:6] = True
    b = np.zeros(SHAPE[1:], bool)
    b[4:8, 4:8] = True
    values, ids = new_objects(current, [a, b], 6)
    assert ids == [6, 7] and not values[0:3, 0:3].any() and values[5, 5] == 6
    assert values[7, 7] == 7


def test_live_write_is_one_undo_step_and_keeps_the_users_paint():
    layer = _layer()
    before = layer.data.copy()
    live = LiveWrite(layer)
    mask = np.zeros(SHAPE[1:], bool)
    mask[10:14, 10:20] = True
    idx = plane_indices((0,), mask)
    live.write(idx, np.zeros(mask.sum(), np.int32), np.full(mask.sum(), 3, np.int32))
    layer.data[0, 10, 10] = 5  # the user paints over one pixel during the run
    assert live.finish() == mask.sum() - 1
    layer.undo()
    expected = before.copy()
    expected[0, 10, 10] = 5
    np.testing.assert_array_equal(layer.data, expected)


def test_live_write_of_a_plane_written_twice_undoes_to_the_first_values():
    """A slice written by both passes of a run: undo gives what was there before the run,
    redo what the last write left, on numpy data and on data without a flat view."""
    for transpose in (False, True):
        layer = _layer()
        if transpose:  # not C-contiguous: the n-D indexing path
            layer.data = np.ascontiguousarray(layer.data.transpose(0, 2, 1)).transpose(0, 2, 1)
            assert not layer.data.flags.c_contiguous
        before = layer.data.copy()
        live = LiveWrite(layer)
        writes = [(1, (slice(0, 8), slice(0, 12)), 3), (2, (slice(5, 9), slice(20, 25)), 4),
                  (1, (slice(4, 10), slice(6, 16)), 5), (0, (slice(1, 3), slice(1, 3)), 6)]
        for k, (rows, cols), value in writes:
            mask = np.zeros(SHAPE[1:], bool)
            mask[rows, cols] = True
            idx = plane_indices((k,), mask)
            live.write(idx, np.asarray(layer.data[idx]), np.full(mask.sum(), value, np.int32))
        after = layer.data.copy()
        assert after[1, 5, 7] == 5 and after[1, 0, 0] == 3 and after[2, 6, 21] == 4
        assert live.finish() == int((after != before).sum())
        np.testing.assert_array_equal(layer.data, after)
        layer.undo()
        np.testing.assert_array_equal(layer.data, before)
        layer.redo()
        np.testing.assert_array_equal(layer.data, after)


def test_commit_log_follows_undo_and_redo_and_forgets_after_a_new_commit():
    layer = _layer()
    values = np.zeros(SHAPE[1:], np.int64)
    values[10:15, 2:12] = 8
    write_planes(layer, [((0,), values, None)], entry={"workflow": "clicks", "n": 1})
    other = np.zeros(SHAPE[1:], np.int64)
    other[12:18, 20:28] = 9
    write_planes(layer, [((2,), other, None)], entry={"workflow": "clicks", "n": 2})
    assert [e["n"] for e in commit_log.live_entries(layer)] == [1, 2]
    layer.undo()
    assert [e["n"] for e in commit_log.live_entries(layer)] == [1]
    layer.redo()
    assert [e["n"] for e in commit_log.live_entries(layer)] == [1, 2]
    layer.undo()
    again = np.zeros(SHAPE[1:], np.int64)
    again[12:18, 20:28] = 9  # the same id on the same pixels as the undone commit
    write_planes(layer, [((2,), again, None)], entry={"workflow": "text", "n": 3})
    assert [e["n"] for e in commit_log.live_entries(layer)] == [1, 3]  # 2 is not resurrected


def test_propagated_slice_replaces_its_own_ids_and_keeps_others_unless_overwrite():
    current = np.zeros((6, 9), np.int32)
    current[0, :3] = 4  # object 4's old pixels: it is re-propagated (replace)
    current[5, 6:] = 7  # another object
    owner = np.zeros((6, 9), np.int32)
    owner[1, :4] = 4
    owner[5, 5:8] = 2
    kept = propagated(current, owner, [4, 2], replace=[4])
    assert not (kept[0] == 4).any() and (kept[1, :4] == 4).all()  # old pixels gave way
    assert (kept[5, 6:] == 7).all() and kept[5, 5] == 2  # 7 kept its pixels
    taken = propagated(current, owner, [4, 2], replace=[4], overwrite=True)
    assert (taken[5, 5:8] == 2).all() and taken[5, 8] == 7
    untouched = propagated(current, owner, [2], replace=[4])  # 4 has no output here
    assert (untouched[0, :3] == 4).all()
    assert current[0, 0] == 4  # a new array: the input is left as it was


def test_commit_log_counts_what_the_layer_held_before_its_first_commit():
    layer = _layer()  # the user's object: 24 pixels
    layer.data[0, 0:3, 0:5] = 6  # and 15 painted before any commit
    values = np.zeros(SHAPE[1:], np.int64)
    values[10:15, 2:12] = 8
    write_planes(layer, [((0,), values, None)], entry={"workflow": "clicks", "n": 1})
    write_planes(layer, [((2,), values, None)], entry={"workflow": "clicks", "n": 2})
    assert commit_log.held_before(layer) == 39  # the commits' own pixels not counted
    layer.undo()
    layer.undo()  # every commit undone: the next one counts anew
    layer.data[2, 0:2, 0:2] = 5
    write_planes(layer, [((0,), values, None)], entry={"workflow": "clicks", "n": 3})
    assert commit_log.held_before(layer) == 43
    assert [e["n"] for e in commit_log.live_entries(layer)] == [3]
