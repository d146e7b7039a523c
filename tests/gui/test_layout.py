"""The dock keeps its width whatever it shows; the launcher shows the whole image."""

from __future__ import annotations

import pytest

from .gui_helpers import blob_stack, settle

pytestmark = pytest.mark.gui


def test_dock_width_does_not_change_when_a_model_loads(make_napari_viewer, open_widget, qtbot,
                                                       hf_bundle):
    viewer = make_napari_viewer(show=True)
    stack, _truth, centre = blob_stack()
    image = viewer.add_image(stack)
    w = open_widget(viewer)
    qtbot.waitUntil(lambda: w.isVisible(), timeout=3000)
    qtbot.wait(300)  # napari lays the dock out after it is shown
    before = w.width()
    w.load_bundle(hf_bundle, toy=True)
    widths = {"loaded": w.width()}
    for i in range(w.tabs.count()):
        w.tabs.setCurrentIndex(i)
        qtbot.wait(50)
        widths[w.tabs.tabText(i)] = w.width()
    w.tabs.setCurrentIndex(0)
    lay, k = w.session.layers, 1
    viewer.dims.set_current_step(0, k)
    lay.points.add([k, *centre(k, "A")[:2]])
    settle(qtbot, w.session)
    w.commit()
    qtbot.wait(50)
    widths["committed"] = w.width()
    image.name = "a rather long image layer name, as microscope files have"
    qtbot.wait(50)
    widths["renamed"] = w.width()
    assert set(widths.values()) == {before}, (before, widths)


def test_the_launcher_shows_the_whole_sample(qtbot, make_napari_viewer):
    from napari_sam3_onnx._napari.clicks.fov import visible_rect
    from napari_sam3_onnx._napari.launch import open_viewer

    viewer, _w = open_viewer(show=True, viewer=make_napari_viewer(show=True))
    try:
        qtbot.wait(300)  # the window laid out, the canvas at its size beside the dock
        image = viewer.layers["synthetic nuclei"]
        r0, c0, r1, c1 = visible_rect(viewer, image)
        rows, cols = image.data.shape[-2:]
        assert r0 <= 0 and c0 <= 0 and r1 >= rows - 1 and c1 >= cols - 1, (r0, c0, r1, c1)
    finally:
        viewer.close()
