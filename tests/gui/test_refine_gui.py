"""Refining a label already in a Labels layer, in the Clicks tab, with real mouse events."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from qtpy.QtCore import Qt
from vispy.util import keys

from .gui_helpers import iou, settle

pytestmark = pytest.mark.gui

SHAPE = (3, 70, 110)  # z, rows, cols: asymmetric
CELL = (40, 70, 10)  # the cell on plane 1 (row, col, radius)
OTHER = (15, 20, 6)


def _disc(r, c, rad):
    rr, cc = np.mgrid[:SHAPE[1], :SHAPE[2]]
    return (rr - r) ** 2 + (cc - c) ** 2 <= rad**2


def _scene():
    """The image and a Cellpose-like labels stack: id 5 is the cell's left half on plane 1."""
    image = np.zeros(SHAPE, np.uint8)
    cell, other = _disc(*CELL), _disc(*OTHER)
    for z in range(SHAPE[0]):
        image[z][cell | other] = 200
    labels = np.zeros(SHAPE, np.int32)
    labels[1][cell & (np.arange(SHAPE[2])[None, :] <= CELL[1])] = 5
    labels[1][other] = 2
    labels[1][cell & (np.arange(SHAPE[2])[None, :] >= CELL[1] + 8)] = 7  # a neighbour's sliver
    labels[0][cell] = 5  # the same id on other planes: never touched
    labels[2][other] = 5
    return image, labels, cell


def _click(viewer, qtbot, row, col, modifiers=()):
    """A real press and release on the canvas at world ``(row, col)`` of the 2-D view."""
    from .gui_helpers import Mouse

    mouse = Mouse(viewer, qtbot)
    pos = mouse.at(row, col)
    mouse.canvas.events.mouse_press(pos=pos, modifiers=modifiers, button=1)
    qtbot.wait(20)
    mouse.canvas.events.mouse_release(pos=pos, modifiers=modifiers, button=1)
    qtbot.wait(20)


def _open(make_widget, qtbot):
    image, labels, cell = _scene()
    viewer, _image, w = make_widget(image)
    layer = viewer.add_labels(labels.copy(), name="cellpose")
    layer.features = pd.DataFrame({"index": [0, 2, 5], "area": [0.0, 113.0, 157.0]})
    layer.opacity = 0.4
    viewer.dims.set_current_step(0, 1)
    settle(qtbot, w.session)
    return viewer, w, layer, labels, cell


def test_alt_click_picks_a_label_and_a_click_restores_its_missing_half(make_widget, qtbot):
    viewer, w, layer, before, cell = _open(make_widget, qtbot)
    features = layer.features.copy()
    viewer.layers.selection.active = layer
    _click(viewer, qtbot, CELL[0], CELL[1] - 5, modifiers=(keys.ALT,))  # on the half label
    settle(qtbot, w.session)
    assert w.session.refining is not None and w.session.refining.label_id == 5
    assert w.session.source.name == "cellpose"
    assert "takes no mask prompt" in w.refine.note.text()  # the hf toy: box and clicks
    lay = w.session.layers
    assert viewer.layers.selection.active.name == "SAM prompts" and len(lay.points.data) == 0
    half = lay.preview.data[1] > 0
    assert iou(half, cell) < 0.6  # SAM's answer to the label's box: the half
    _click(viewer, qtbot, CELL[0], CELL[1] + 6)  # one positive click on the missing half
    settle(qtbot, w.session)
    assert len(lay.points.data) == 1
    restored = lay.preview.data[1] > 0
    assert iou(restored, cell) > 0.85 and iou(restored, half) < 0.6
    assert w.commit() == [5]
    after = np.asarray(layer.data)
    np.testing.assert_array_equal(after[1] == 5, restored & ~np.isin(before[1], (2, 7)))
    for other in (2, 7):  # the other ids are untouched, even where SAM's answer covers them
        np.testing.assert_array_equal(after[1] == other, before[1] == other)
    assert (restored & (before[1] == 7)).any()
    np.testing.assert_array_equal(after[[0, 2]], before[[0, 2]])  # so are the other planes
    pd.testing.assert_frame_equal(layer.features, features)
    assert layer.opacity == pytest.approx(0.4)
    assert not (np.asarray(lay.target.data) > 0).any()  # nothing went to 'SAM objects'
    assert w.session.refining is None
    layer.undo()  # one undo step takes the whole refinement back
    np.testing.assert_array_equal(np.asarray(layer.data), before)


def test_the_id_field_picks_from_the_commit_to_layer(make_widget, qtbot):
    viewer, w, layer, before, _cell = _open(make_widget, qtbot)
    w.target.setCurrentIndex(w.target.findText("cellpose"))
    w.refine.label_id.setValue(2)
    qtbot.mouseClick(w.refine.go, Qt.MouseButton.LeftButton)
    settle(qtbot, w.session)
    assert w.session.refining is not None and w.session.refining.label_id == 2
    assert iou(w.session.layers.preview.data[1] > 0, _disc(*OTHER)) > 0.6
    qtbot.mouseClick(w.refine.halt, Qt.MouseButton.LeftButton)
    assert w.session.refining is None
    assert w.refine.refine()  # again, then move to another plane: refining stops there
    settle(qtbot, w.session)
    viewer.dims.set_current_step(0, 2)
    settle(qtbot, w.session)
    assert w.session.refining is None and not w.session.layers.preview.data.any()
    viewer.dims.set_current_step(0, 1)
    settle(qtbot, w.session)
    w.refine.label_id.setValue(9)  # not on this plane: refused, said why
    qtbot.mouseClick(w.refine.go, Qt.MouseButton.LeftButton)
    assert w.session.refining is None and "no pixel on this plane" in w.status.text()
    np.testing.assert_array_equal(np.asarray(layer.data), before)


def test_a_model_change_stops_refining(make_widget, qtbot, tmp_path):
    from napari_sam3_onnx.testing.nso import build_nso

    _viewer, w, layer, before, _cell = _open(make_widget, qtbot)
    assert w.session.pick(layer, 5) is not None
    settle(qtbot, w.session)
    w.load_bundle(build_nso(tmp_path / "nso"))  # its mask prompt has another size
    qtbot.waitUntil(lambda: w.workspace.adapter is not None and
                    w.workspace.adapter.prompt_decoder.accepts_mask_input, timeout=20000)
    settle(qtbot, w.session)
    assert w.session.refining is None and "model changed" in " ".join(w.session.messages)
    assert "Alt+click" in w.refine.note.text()
    target = w.session.pick(layer, 5)  # picked again: the new decoder's mask prompt
    assert target is not None and target.uses_mask
    assert target.logits.shape == w.workspace.adapter.prompt_decoder.mask_size
    assert "mask prompt" in w.refine.note.text()
    np.testing.assert_array_equal(np.asarray(layer.data), before)
