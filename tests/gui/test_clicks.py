"""Clicks, boxes, preview and commit in a real viewer with the toy tracker-pair bundle."""

from __future__ import annotations

import numpy as np
import pytest

from .gui_helpers import blob_stack, iou, settle

pytestmark = pytest.mark.gui


def _show(viewer, z):
    viewer.dims.set_current_step(0, z)


def _rect(z, r0, c0, r1, c1):
    return np.array([[z, r0, c0], [z, r0, c1], [z, r1, c1], [z, r1, c0]], float)


def test_click_segments_the_blob_on_its_plane_only(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay = w.session.layers
    assert [la.name for la in viewer.layers][1:] == [
        "SAM prompts", "SAM boxes", "SAM preview", "SAM objects"]
    assert lay.preview.data.shape == stack.shape and lay.target.data.shape == stack.shape
    k = 3
    _show(viewer, k)
    lay.points.add([1, *centre(1, "A")[:2]])  # a click on another plane: not this object
    r, c, _ = centre(k, "B")
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    preview = lay.preview.data > 0
    assert iou(preview[k], truth(k, "B")) > 0.75
    assert not (preview[k] & truth(k, "A")).any()
    assert not preview[np.arange(5) != k].any()


def test_negative_click_shrinks_and_box_gives_boxed_object(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 2
    _show(viewer, k)
    r, c, _ = centre(k, "B")
    lay.points.add([k, r, c - 3])
    settle(qtbot, w.session)
    positive = lay.preview.data[k] > 0
    w.toggle()  # what 't' does: the next click is negative
    assert w.negative.isChecked()
    lay.points.add([k, r, c + 6])
    settle(qtbot, w.session)
    assert list(lay.points.features["positive"]) == [True, False]
    both = lay.preview.data[k] > 0
    assert both.sum() < positive.sum() - 5
    assert not both[r, c + 6] and both[r, c - 3]
    assert not (both & ~positive).any()

    w.clear()
    settle(qtbot, w.session)
    assert len(lay.points.data) == 0 and not lay.preview.data.any()
    ra, ca, rad = centre(k, "A")
    lay.shapes.add(_rect(k, ra - rad - 3, ca - rad - 3, ra + rad + 3, ca + rad + 3),
                   shape_type="rectangle")
    settle(qtbot, w.session)
    assert iou(lay.preview.data[k] > 0, truth(k, "A")) > 0.75


def test_several_boxes_are_several_objects_and_bad_box_is_a_message(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 0
    _show(viewer, k)
    for which in "AB":
        r, c, rad = centre(k, which)
        lay.shapes.add(_rect(k, r - rad - 2, c - rad - 2, r + rad + 2, c + rad + 2),
                       shape_type="rectangle")
    lay.shapes.add(_rect(k, 100, 10, 120, 30), shape_type="rectangle")  # below the image
    settle(qtbot, w.session)
    preview = lay.preview.data[k]
    assert set(np.unique(preview)) == {0, 1, 2}
    assert iou(preview == 1, truth(k, "A")) > 0.75 and iou(preview == 2, truth(k, "B")) > 0.75
    assert any("outside the image" in m for m in w.session.messages)
    ids = w.commit()
    assert ids == [1, 2]
    assert len(lay.shapes.data) == 0 and not lay.preview.data.any()


def test_commit_takes_max_plus_one_keeps_others_and_undoes(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 4
    _show(viewer, k)
    r, c, _ = centre(k, "B")
    lay.target.data[k, r - 2: r + 3, c - 12: c] = 7  # an existing object over part of B
    lay.target.data[0, 0, 0] = 5
    before = lay.target.data.copy()
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    assert w.commit() == [8]
    after = lay.target.data
    assert (after[before == 7] == 7).all()  # not overwritten
    new = after == 8
    assert new[k].any() and not new[np.arange(5) != k].any()
    assert iou(new[k] | (before[k] == 7) & truth(k, "B"), truth(k, "B")) > 0.75
    assert len(lay.points.data) == 0 and not lay.preview.data.any()
    lay.target.undo()
    np.testing.assert_array_equal(lay.target.data, before)

    w.overwrite.setChecked(True)
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    assert w.commit() == [8]
    assert (lay.target.data[k][truth(k, "B") & (before[k] == 7)] == 8).any()


def test_reprompting_a_plane_never_reencodes(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, enc, k = w.session.layers, w.session.encoder, 1
    _show(viewer, k)
    r, c, _ = centre(k, "A")
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1
    lay.points.add([k, r + 2, c + 1])
    settle(qtbot, w.session)
    _show(viewer, 0)
    settle(qtbot, w.session)
    _show(viewer, k)
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1
    assert lay.preview.data[k].any()
    viewer.layers[0].contrast_limits = (0, 6000)  # another window: what the model sees changed
    settle(qtbot, w.session)
    assert enc.encoder_calls == 2


def test_commit_without_preview_is_a_message(make_widget, qtbot):
    stack, _truth, _centre = blob_stack()
    _viewer, _image, w = make_widget(stack)
    assert w.commit() == []
    assert "no object to commit" in w.status.text()


def test_box_plus_clicks_is_one_object_and_neighbours_pre_encode(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, enc, k = w.session.layers, w.session.encoder, 2
    w.prefetch.setChecked(True)
    _show(viewer, k)
    r, c, rad = centre(k, "B")
    lay.shapes.add(_rect(k, r - rad - 3, c - rad - 3, r + rad + 3, c + rad + 3),
                   shape_type="rectangle")
    settle(qtbot, w.session)
    boxed = lay.preview.data[k] > 0
    w.toggle()
    lay.points.add([k, r, c + 5])  # a negative click inside the box refines the boxed object
    settle(qtbot, w.session)
    refined = lay.preview.data[k]
    assert set(np.unique(refined)) == {0, 1}  # still one object
    assert (refined > 0).sum() < boxed.sum() - 5 and not refined[r, c + 5]
    qtbot.waitUntil(lambda: enc.encoder_calls == 3, timeout=3000)  # planes 3 and 4 ahead (up)
    w.prefetch.setChecked(False)  # (else plane 5... would be planned next)
    _show(viewer, k + 1)
    w.toggle()  # back to positive
    lay.points.add([k + 1, *centre(k + 1, "A")[:2]])
    settle(qtbot, w.session)
    assert iou(lay.preview.data[k + 1] > 0, truth(k + 1, "A")) > 0.75
    assert enc.encoder_calls == 3


def test_ctrl_z_on_the_prompt_layer_undoes_the_commit(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 2
    _show(viewer, k)
    keys = viewer.window._qt_viewer._key_map_handler
    lay.target.data[0, :3, :4] = 9  # the user's own earlier object stays
    before = lay.target.data.copy()
    lay.points.add([k, *centre(k, "A")[:2]])
    settle(qtbot, w.session)
    keys.press_key("c")
    assert viewer.layers.selection.active.name == "SAM prompts"  # where the user annotates
    committed = lay.target.data.copy()
    assert iou(committed[k] == 10, truth(k, "A")) > 0.75
    keys.press_key("Control-Z")
    np.testing.assert_array_equal(lay.target.data, before)
    assert "Undid" in w.status.text()
    keys.press_key("Control-Shift-Z")
    np.testing.assert_array_equal(lay.target.data, committed)
    viewer.layers.selection.active = lay.shapes  # the boxes layer too
    keys.press_key("Control-Z")
    np.testing.assert_array_equal(lay.target.data, before)
