"""Choosing images does not pile up layers; Shift+C clears every shape it ignored."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx._napari.layers import PREVIEW_NAME

from .gui_helpers import blob_stack, settle

pytestmark = pytest.mark.gui


def _names(viewer):
    return [la.name for la in viewer.layers]


@pytest.mark.slow  # > 5 s (six images, one encode each); docs/contributing.md
def test_six_images_chosen_in_turn_leave_one_set_of_layers(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, first, w = make_widget(stack)
    images = [first] + [viewer.add_image(np.roll(stack, 7 * i, axis=2), name=f"image {i}")
                        for i in range(1, 6)]
    for image in images[1:] + images[:1]:
        w.image.setCurrentIndex(w.image.findText(image.name))
    assert len(viewer.layers) == 6 + 4, _names(viewer)

    lay, k = w.session.layers, 1  # the first image again: give it a committed object
    viewer.dims.set_current_step(0, k)
    lay.points.add([k, *centre(k, "A")[:2]])
    settle(qtbot, w.session)
    assert w.commit() == [1]
    lay.points.add([k, *centre(k, "B")[:2]])  # an uncommitted click stays too
    target, points = lay.target, lay.points
    w.image.setCurrentIndex(w.image.findText("image 3"))
    names = _names(viewer)
    assert target.name in names and points.name in names  # the user's work is kept
    assert sum(n.startswith(PREVIEW_NAME) for n in names) == 1  # only the current preview
    assert sum(n.startswith("SAM boxes") for n in names) == 1
    assert len(viewer.layers) == 6 + 4 + 2, names


def test_shift_c_clears_ellipses_so_the_note_does_not_come_back(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 2
    viewer.dims.set_current_step(0, k)
    r, c, rad = centre(k, "A")
    box = np.array([[k, r - rad - 2, c - rad - 2], [k, r - rad - 2, c + rad + 2],
                    [k, r + rad + 2, c + rad + 2], [k, r + rad + 2, c - rad - 2]], float)
    lay.shapes.add(box, shape_type="rectangle")
    lay.shapes.add(box + np.array([0, 20, 30]), shape_type="ellipse")
    settle(qtbot, w.session)
    assert "non-rectangle" in w.session.messages[-1]
    keys = viewer.window._qt_viewer._key_map_handler
    viewer.layers.selection.active = lay.shapes
    keys.press_key("Shift-C")
    settle(qtbot, w.session)
    assert len(lay.shapes.data) == 0
    seen = len(w.session.messages)
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    assert not any("non-rectangle" in m for m in w.session.messages[seen:])
