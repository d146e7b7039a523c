"""Prompts drawn with real mouse events on the canvas."""

from __future__ import annotations

import pytest

from .gui_helpers import Mouse, blob_stack, iou, settle

pytestmark = pytest.mark.gui

NO_AREA = "no area"


def test_drawing_a_box_warns_only_about_a_finished_degenerate_one(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 3
    viewer.dims.set_current_step(0, k)
    viewer.reset_view()
    viewer.layers.selection.active = lay.shapes
    lay.shapes.mode = "add_rectangle"
    mouse = Mouse(viewer, qtbot)
    r, c, rad = centre(k, "B")
    mouse.drag((r - rad - 3, c - rad - 3), (r + rad + 3, c + rad + 3))
    settle(qtbot, w.session)
    assert len(lay.shapes.data) == 1
    assert not any(NO_AREA in m for m in w.session.messages), w.session.messages
    assert iou(lay.preview.data[k] > 0, truth(k, "B")) > 0.75

    mouse.drag((5, 40), (5, 55))  # a flat box, finished: that one gets a message
    settle(qtbot, w.session)
    assert len(lay.shapes.data) == 2
    assert sum(NO_AREA in m for m in w.session.messages) == 1
    assert iou(lay.preview.data[k] == 1, truth(k, "B")) > 0.75  # the good box still shows
