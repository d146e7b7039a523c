"""A run adds no layer when its layer is already there: the Automatic preview is reused.

Adding a Labels layer costs the Qt thread 0.2-0.6 s (its controls, its vispy visual, removing
the one it replaces, and under software OpenGL the first draw's shader build): a new preview at
every Preview click froze the window (issue 27, item 2). A second run must write into the same
layer object, add no layer while it runs, and show what a first run shows.
"""

from __future__ import annotations

import numpy as np
import pytest
from qtpy.QtCore import Qt

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.automatic.output import PREVIEW
from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.layers import unwrap
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

pytestmark = pytest.mark.gui

NZ = 4
SHAPE = (NZ, 96, 140)  # non-square planes


@pytest.fixture
def toy_dock(make_napari_viewer):
    viewer = make_napari_viewer()
    image, _truth = synthetic_nuclei(SHAPE)
    lo, hi = np.percentile(image, [0.5, 99.8])
    viewer.add_image(image, name="nuclei", contrast_limits=(float(lo), float(hi)),
                     scale=(2.0, 1.0, 0.5))
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    widget.model.load_toy()
    return viewer, widget


def _preview(qtbot, panel) -> None:
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)


def test_a_second_automatic_run_reuses_the_preview_layer(toy_dock, qtbot):
    viewer, w = toy_dock
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(4)
    panel.scope.set_mode("all")
    _preview(qtbot, panel)
    first = viewer.layers[PREVIEW]
    data, table = np.array(first.data), first.features.copy()
    assert data.any() and len(table)
    first.data[0, :5, :5] = 99  # a stray paint in the preview must not survive the next run

    inserted, removed = [], []
    viewer.layers.events.inserted.connect(lambda e: inserted.append(e.value.name))
    viewer.layers.events.removed.connect(lambda e: removed.append(e.value.name))
    _preview(qtbot, panel)
    assert inserted == [] and removed == []
    assert unwrap(viewer.layers[PREVIEW]) is unwrap(first)
    assert unwrap(panel.output.preview) is unwrap(first)
    assert [la.name for la in viewer.layers].count(PREVIEW) == 1
    np.testing.assert_array_equal(first.data, data)  # the same result as the first run
    assert len(first.features) == len(table)
    np.testing.assert_allclose(first.scale, (2.0, 1.0, 0.5))


def test_the_preview_follows_a_new_image_of_another_shape(toy_dock, qtbot):
    viewer, w = toy_dock
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(4)
    panel.scope.set_mode("all")
    _preview(qtbot, panel)
    first = viewer.layers[PREVIEW]
    other, _ = synthetic_nuclei((NZ + 1, 80, 120))
    viewer.add_image(other, name="other", scale=(2.0, 1.0, 0.5))
    w.image.setCurrentIndex(w.image.findText("other"))
    qtbot.waitUntil(lambda: w.session.image is not None and w.session.image.name == "other")
    _preview(qtbot, panel)
    assert unwrap(viewer.layers[PREVIEW]) is unwrap(first)  # same transform: reused
    assert first.data.shape == other.shape
    # another transform: a new preview in the image's place, the old one gone
    viewer.add_image(other, name="coarse", scale=(1.0, 3.0, 3.0))
    w.image.setCurrentIndex(w.image.findText("coarse"))
    qtbot.waitUntil(lambda: w.session.image is not None and w.session.image.name == "coarse")
    _preview(qtbot, panel)
    assert first not in viewer.layers
    np.testing.assert_allclose(viewer.layers[PREVIEW].scale, (1.0, 3.0, 3.0))
    assert [la.name for la in viewer.layers].count(PREVIEW) == 1
