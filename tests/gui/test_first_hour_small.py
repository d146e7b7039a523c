"""A new user's first hour (issue 27, item 8): a quiet exit, readable click markers, and a dock
that keeps its model when closed and opened again.

The dock is opened the napari way; the shipped toy is the model.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.clicks.fov import camera
from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET

pytestmark = pytest.mark.gui


@pytest.fixture
def sample_dock(make_napari_viewer):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "synthetic_nuclei")
    dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    return viewer, dock, widget


def _said(monkeypatch) -> list[str]:
    """Every pop-up the dock raises from now on (its ``notify`` goes through ``show_info``)."""
    from napari_sam3_onnx._napari import widget as widget_module

    said: list[str] = []
    monkeypatch.setattr(widget_module, "show_info", said.append)
    return said


def test_closing_the_viewer_says_no_layer_was_removed(sample_dock, qtbot, capfd, monkeypatch):
    viewer, _dock, w = sample_dock
    said = _said(monkeypatch)
    session = w.session
    capfd.readouterr()
    viewer.close()  # removes every layer, then closes the window
    qtbot.wait(50)  # a turn of the event loop: deferred news would show now
    out, err = capfd.readouterr()
    assert "was removed" not in out + err, out + err
    assert not [m for m in said if "was removed" in m], said
    assert not [m for m in session.messages if "was removed" in m], session.messages


def test_removing_a_prompt_layer_by_hand_still_says_so(sample_dock, qtbot, monkeypatch):
    viewer, _dock, w = sample_dock
    said = _said(monkeypatch)
    viewer.layers.remove(w.session.layers.points)
    qtbot.waitUntil(lambda: any("'SAM prompts' was removed" in m for m in said), timeout=2000)
    viewer.layers.remove(w.session.layers.image)
    qtbot.waitUntil(lambda: any("image layer" in m and "was removed" in m for m in said),
                    timeout=2000)


@pytest.mark.parametrize("shape", [(1024, 768), (96, 64)])
def test_click_markers_are_about_ten_screen_pixels_at_the_initial_zoom(make_napari_viewer,
                                                                       qtbot, shape):
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros(shape, np.uint8))
    _dock, w = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    qtbot.wait(50)
    viewer.reset_view()
    points = w.session.layers.points
    points.add([shape[0] / 3, shape[1] / 2])
    zoom = camera(viewer).zoom  # screen pixels per data pixel (scale 1)
    on_screen, plane_on_screen = float(points.size[-1]) * zoom, max(shape) * zoom
    assert 400 <= plane_on_screen <= 1000, plane_on_screen  # the initial zoom fits the plane
    assert 8 <= on_screen <= 16, (on_screen, plane_on_screen)  # was 6 and 63 px
    assert points.canvas_size_limits[0] >= 6  # zoomed out, still a visible marker


@pytest.mark.parametrize("how", ["close button", "remove_dock_widget"])
def test_closing_and_reopening_the_dock_keeps_the_loaded_model(sample_dock, make_napari_viewer,
                                                               qtbot, how):
    from qtpy.QtCore import Qt

    viewer, dock, w = sample_dock
    w.model.load_toy()
    adapter = w.model.adapter
    assert adapter is not None
    if how == "close button":  # the dock title bar's x, clicked
        qtbot.mouseClick(dock.title.close_button, Qt.MouseButton.LeftButton)
    else:
        viewer.window.remove_dock_widget(dock)
    qtbot.wait(50)
    assert w.session.closed  # the old dock let go of the viewer
    _dock2, w2 = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    assert w2 is not w
    assert w2.model.adapter is adapter  # the same model, not opened again
    assert "Toy" in w2.model.folder.text() and "Toy model" in w2.model.info.text()
    w2.tabs.setCurrentWidget(w2.panels["Text"])
    assert w2.panels["Text"].run_button.isEnabled()  # its tokenizer came along
    z = int(viewer.dims.current_step[0])
    from .gui_helpers import settle

    w2.session.layers.points.add([z, 60, 100])
    settle(qtbot, w2.session, timeout=10000)
    assert not any("No model is loaded" in m for m in w2.session.messages), w2.session.messages
    other = make_napari_viewer()  # another viewer's dock starts without it
    other.add_image(np.zeros((40, 30), np.uint8))
    _dock3, w3 = other.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    assert w3.model.adapter is None
