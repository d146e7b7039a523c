"""Several images, deleted prompt layers and closing the widget."""

from __future__ import annotations

import numpy as np
import pytest

from .gui_helpers import blob_stack, iou, settle

pytestmark = pytest.mark.gui


def test_each_image_gets_its_own_layers(make_widget, qtbot):
    stack, _truth, _centre = blob_stack()
    viewer, first, w = make_widget(stack)
    own = w.session.layers
    second = viewer.add_image(stack[:, ::-1].copy(), name="flipped")
    w.image.setCurrentIndex(w.image.findText("flipped"))
    theirs = w.session.layers
    assert theirs.image is second
    assert theirs.points is not own.points and theirs.target is not own.target
    assert theirs.points.name == "SAM prompts (flipped)"
    w.image.setCurrentIndex(w.image.findText(first.name))
    assert w.session.layers.points is own.points and w.session.layers.target is own.target


def test_a_deleted_prompt_layer_comes_back_when_the_image_is_chosen_again(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    viewer.layers.remove(w.session.layers.points)
    assert "choose the image" in w.session.messages[-1]
    w.image.activated.emit(w.image.currentIndex())
    points = w.session.layers.points
    assert points in viewer.layers and points.name == "SAM prompts"
    viewer.dims.set_current_step(0, 0)
    points.add([0, *centre(0, "A")[:2]])
    settle(qtbot, w.session)
    assert iou(w.session.layers.preview.data[0] > 0, truth(0, "A")) > 0.75


def test_closing_the_widget_unbinds_keys_and_stops_listening(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    points, session = w.session.layers.points, w.session
    dock = viewer.window._dock_widgets["Clicks and boxes"]
    viewer.window.remove_dock_widget(dock)
    del dock, w
    qtbot.waitUntil(lambda: session.layers is None, timeout=3000)
    keys = viewer.window._qt_viewer._key_map_handler
    viewer.layers.selection.active = points
    keys.press_key("t")  # nothing bound any more: no call into a deleted widget
    keys.press_key("c")
    points.add([0, *centre(0, "A")[:2]])
    qtbot.wait(300)
    assert not session.pending and session._running == 0
    assert not np.any(viewer.layers["SAM preview"].data)
