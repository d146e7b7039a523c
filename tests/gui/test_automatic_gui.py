"""The Automatic tab in a real viewer: preview a stack, commit as one undo step, evaluate."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

from .conftest import open_plugin_widget

pytestmark = pytest.mark.gui

SHAPE = (150, 230)


def drifting(z):
    return ((30 + 2 * z, 40 + 3 * z, 10), (100 - z, 150 + 2 * z, 9))


@pytest.fixture(scope="module")
def steep(tmp_path_factory):
    return build_sloped_tracker(tmp_path_factory.mktemp("steep"), TestGeometry(grid=24))


def test_preview_commit_undo_and_evaluate(make_napari_viewer, steep, qtbot):
    from napari_sam3_onnx._napari.automatic.output import PREVIEW, RESULT

    viewer = make_napari_viewer()
    data = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(3)])
    viewer.add_image(data, contrast_limits=(0, 255), scale=(2.0, 1.0, 0.5))
    _dock, widget = open_plugin_widget(viewer)  # as napari opens it
    widget.load_bundle(steep, toy=True)
    panel = widget.panels["Automatic"]
    widget.tabs.setCurrentWidget(panel)
    assert not panel.settings.isVisible()  # folded away
    panel.settings.points_per_side.setValue(12)
    panel.scope.set_mode("all")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    preview = viewer.layers[PREVIEW]
    np.testing.assert_allclose(preview.scale, (2.0, 1.0, 0.5))
    assert len(np.unique(preview.data)) == 3  # two 3-D objects, linked through z
    table = preview.features
    assert set(table.columns) >= {"index", "label", "score", "stability", "area_px"}
    assert len(table) == 6
    assert panel.commit_button.isEnabled()
    # the user's layer already holds an object: the commit goes around it, above its ids
    user = viewer.add_labels(np.zeros(data.shape, np.int32), name="mine")
    user.data[0, 0:5, 0:5] = 7
    panel._layers_changed()
    panel.target.setCurrentIndex(panel.target.findText("mine"))
    panel.commit()
    assert PREVIEW not in viewer.layers and RESULT not in viewer.layers
    ids = set(np.unique(user.data)) - {0, 7}
    assert ids == {8, 9} and (user.data[0, 0:5, 0:5] == 7).all()
    r, c, _ = drifting(2)[0]
    assert user.data[2, r, c] in ids
    user.undo()  # one step removes the whole run
    assert set(np.unique(user.data)) == {0, 7}
    user.redo()
    truth = viewer.add_labels(np.zeros(data.shape, np.int32), name="truth")
    for z in range(3):
        for k, (r, c, rad) in enumerate(drifting(z)):
            truth.data[z][disc(SHAPE, r, c, rad)] = k + 1
    panel._layers_changed()
    panel.pred_layer.setCurrentIndex(panel.pred_layer.findText("mine"))
    panel.truth_layer.setCurrentIndex(panel.truth_layer.findText("truth"))
    panel.evaluate()
    assert "mSA" in panel.table.text() and "mine" in panel.table.text()
    assert "against 'truth'" in panel.messages[-1]


def test_routine_news_stays_on_the_status_line_and_only_errors_pop_up(make_napari_viewer, steep,
                                                                      qtbot, monkeypatch):
    from napari_sam3_onnx._napari import widget as widget_module

    toasts = []
    monkeypatch.setattr(widget_module, "show_info", toasts.append)
    viewer = make_napari_viewer()
    viewer.add_image(blob_image(SHAPE, drifting(0), value=255), contrast_limits=(0, 255))
    _dock, widget = open_plugin_widget(viewer)
    widget.load_bundle(steep, toy=True)
    panel = widget.panels["Automatic"]
    assert panel.status is widget.status  # one status line for the dock
    panel.settings.points_per_side.setValue(8)
    toasts.clear()
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert "preview" in widget.status.text() and not toasts, toasts  # routine: no pop-up
    viewer.add_labels(np.zeros((10, 10), np.int32), name="wrong size")
    panel._layers_changed()
    panel.truth_layer.setCurrentIndex(panel.truth_layer.findText("wrong size"))
    panel.evaluate()  # shapes differ: that stops the user, so it pops up
    assert toasts and toasts[-1] == widget.status.text(), toasts
