"""The "Like these" tab: a labelled cell as SAM 3 exemplar, found again through the stack."""

from __future__ import annotations

import numpy as np
import pytest
from qtpy.QtCore import Qt

from napari_sam3_onnx.toy import bundle as toy_bundle

pytestmark = pytest.mark.gui

N, R, C = 5, 96, 128
BRIGHT = [(20, 20), (30, 90), (70, 50)]
DIM = [(75, 110), (50, 15)]


def scene():
    rr, cc = np.mgrid[:R, :C]
    image = np.zeros((N, R, C), np.uint8)
    truth = np.zeros((N, R, C), np.int32)
    for z in range(N):
        for k, (r, c) in enumerate(BRIGHT, 1):
            disc = (rr - r) ** 2 + (cc - c - 2 * z) ** 2 <= 49
            image[z][disc], truth[z][disc] = 220, k
        for r, c in DIM:
            image[z][(rr - r) ** 2 + (cc - c + z) ** 2 <= 49] = 90
    return image, truth


@pytest.fixture(scope="module")
def toy_folder(tmp_path_factory):
    return toy_bundle.build(tmp_path_factory.mktemp("toy") / "toy")


def test_one_labelled_cell_finds_every_cell_through_the_stack(make_widget, qtbot, toy_folder):
    image, truth = scene()
    viewer, _image, w = make_widget(image)
    w.load_bundle(toy_folder)
    qtbot.waitUntil(lambda: w.workspace.encoder is not None, timeout=20000)
    exemplars = np.zeros_like(truth)
    exemplars[2][truth[2] == 1] = 4  # one annotated cell, on plane 2
    layer = viewer.add_labels(exemplars.copy(), name="annotated")
    panel = w.panels["Like these"]
    w.tabs.setCurrentWidget(panel)
    viewer.dims.set_current_step(0, 2)
    panel.source.setCurrentIndex(panel.source.findText("annotated"))
    assert panel.source.currentText() == "annotated" and panel.through.isEnabled()
    panel.ids.setText("4")
    qtbot.mouseClick(panel.through, Qt.MouseButton.LeftButton)
    assert panel.through.isChecked()
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    out = np.asarray(viewer.layers["SAM like these"].data)
    assert out.shape == truth.shape
    ids = []
    for k in range(1, 4):  # each cell: one id, on every plane
        got = set(np.unique(out[truth == k])) - {0}
        assert len(got) == 1, (k, got)
        ids.append(got.pop())
        for z in range(N):
            assert (out[z][truth[z] == k] > 0).mean() > 0.95, (k, z)
    assert len(set(ids)) == 3
    assert not out[image == 90].any()  # not the dim debris
    assert "3 object(s) like the exemplars" in panel.note.text() and "memory" in panel.note.text()
    np.testing.assert_array_equal(np.asarray(layer.data), exemplars)  # the exemplars untouched
