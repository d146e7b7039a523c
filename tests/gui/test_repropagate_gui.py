"""The Propagate tab re-propagates a label id that is already in any Labels layer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from qtpy.QtCore import Qt

from .gui_helpers import iou, settle

pytestmark = pytest.mark.gui

Z, ROWS, COLS = 7, 50, 80


def blob(z):
    rr, cc = np.mgrid[:ROWS, :COLS]
    return (rr - 25) ** 2 + (cc - (20 + 3 * z)) ** 2 <= 36


def test_an_existing_label_is_re_propagated_forward_writing_only_that_id(make_widget, qtbot):
    image = np.zeros((Z, ROWS, COLS), np.uint16)
    for z in range(Z):
        image[z][blob(z)] = 3000
    labels = np.zeros((Z, ROWS, COLS), np.int32)
    labels[3][blob(3)] = 4  # right on slice 3, the seed
    labels[1][2:8, 2:8] = 4  # before the seed: kept
    labels[5][40:46, 60:70] = 4  # an old wrong piece after it: replaced
    labels[5][blob(5) & (np.arange(COLS)[None, :] > 37)] = 6  # a neighbour: untouched
    viewer, _image, w = make_widget(image)
    layer = viewer.add_labels(labels.copy(), name="cellpose")
    layer.features = pd.DataFrame({"index": [0, 4, 6], "kind": ["bg", "cell", "cell"]})
    features = layer.features.copy()
    w.target.setCurrentIndex(w.target.findText("cellpose"))  # any Labels layer of that shape
    panel = w.panels["Propagate"]
    w.tabs.setCurrentWidget(panel)
    viewer.dims.set_current_step(0, 3)
    settle(qtbot, w.session)
    qtbot.mouseClick(panel.from_ids, Qt.MouseButton.LeftButton)
    panel.ids.setText("4")
    panel.direction.setCurrentIndex(1)  # up (increasing z): forward
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    out = np.asarray(layer.data)
    np.testing.assert_array_equal(out[:3], labels[:3])  # slices before the seed are kept
    for z in range(3, Z):
        assert iou(out[z] == 4, blob(z) & (labels[z] != 6)) > 0.6, z
    assert not (out[5][40:46, 60:70] == 4).any()  # the old wrong pixels were replaced
    np.testing.assert_array_equal(out == 6, labels == 6)  # only id 4 was written
    assert set(np.unique(out)) == {0, 4, 6}
    pd.testing.assert_frame_equal(layer.features, features)
    layer.undo()  # one undo step
    np.testing.assert_array_equal(np.asarray(layer.data), labels)
