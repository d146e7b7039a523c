"""OME-Zarr in the viewer: napari opens our labels with their scale; the dock saves them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from napari_sam3_onnx.api.labels_files import write_labels

from .conftest import open_plugin_widget
from .gui_helpers import blob_stack, settle

pytestmark = pytest.mark.gui

SCALE = (2.0, 0.5, 0.25)
TRANSLATE = (0.0, 10.0, -5.0)


def ngff_attrs(path: Path) -> dict:
    attrs = zarr.open_group(str(path), mode="r").attrs.asdict()
    return {**attrs, **attrs.get("ome", {})}


def make_image(path: Path, stack: np.ndarray, scale=SCALE) -> Path:
    """A NGFF 0.4 image of ``stack`` (z, y, x in micrometres)."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    root.create_array("0", data=stack, chunks=(1, *stack.shape[1:]))
    root.attrs.update({"multiscales": [{
        "version": "0.4",
        "axes": [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": list(scale)}]}]}]})
    return path


def test_napari_ome_zarr_opens_the_cli_labels_with_their_scale(make_napari_viewer, tmp_path):
    pytest.importorskip("napari_ome_zarr")
    rows, cols = 300, 1100  # two levels, non-square
    planes = [np.zeros((rows, cols), np.int32) for _ in range(3)]
    for z, plane in enumerate(planes):
        plane[20 + 30 * z:60 + 30 * z, 700:900] = z + 1
    path = write_labels(tmp_path / "labels.ome.zarr", (3, rows, cols), iter(planes),
                        pixel_size=(0.4, 0.65), axes="ZYX")
    viewer = make_napari_viewer()
    layers = viewer.open(str(path), plugin="napari-ome-zarr")
    assert [type(la).__name__ for la in layers] == ["Labels"]
    labels = layers[0]
    np.testing.assert_allclose(labels.scale, (1.0, 0.4, 0.65))
    level0 = labels.data[0] if labels.multiscale else labels.data
    np.testing.assert_array_equal(np.asarray(level0[2]), planes[2])


def test_images_opened_from_ome_zarr_keep_their_scale_into_results_and_labels_inside(
        make_napari_viewer, qtbot, tmp_path, hf_bundle):
    pytest.importorskip("napari_ome_zarr")
    from napari_sam3_onnx._napari.save_labels import save_labels, target_for

    stack, _truth, centre = blob_stack()
    image_path = make_image(tmp_path / "img.ome.zarr", stack)
    viewer = make_napari_viewer()
    [image] = viewer.open(str(image_path), plugin="napari-ome-zarr")
    np.testing.assert_allclose(image.scale, SCALE)
    _dock, w = open_plugin_widget(viewer)  # as napari opens it
    w.load_bundle(hf_bundle, toy=True)
    viewer.dims.set_current_step(0, 2)
    w.session.layers.points.add([2, *centre(2, "B")[:2]])
    settle(qtbot, w.session)
    assert w.commit() == [1]
    target = w.session.layers.target
    np.testing.assert_allclose(target.scale, SCALE)
    out = save_labels(target, target_for(image_path, "SAM objects"))
    assert out == image_path / "labels" / "SAM_objects"
    layers = viewer.open(str(image_path), plugin="napari-ome-zarr")
    by_type = {type(la).__name__: la for la in layers}
    np.testing.assert_allclose(by_type["Labels"].scale, SCALE)
    got = by_type["Labels"].data
    np.testing.assert_array_equal(np.asarray((got[0] if by_type["Labels"].multiscale
                                              else got)[2]), target.data[2])


def test_result_layers_keep_the_images_scale_and_save_it(make_widget, qtbot, tmp_path,
                                                          monkeypatch):
    from qtpy.QtWidgets import QFileDialog, QMessageBox

    stack, truth, centre = blob_stack()
    viewer, image, w = make_widget(stack, scale=SCALE, translate=TRANSLATE)
    viewer.dims.set_current_step(0, 3)
    r, c, _ = centre(3, "A")
    points = w.session.layers.points  # shares the image's transform: data coordinates
    np.testing.assert_allclose(points.scale, SCALE)
    points.add([3, r, c])
    settle(qtbot, w.session)
    assert w.commit() == [1]
    target = w.session.layers.target
    np.testing.assert_allclose(target.scale, SCALE)
    np.testing.assert_allclose(target.translate, TRANSLATE)
    assert (target.data[3] == 1).sum() > 0.7 * truth(3, "A").sum()
    # The propagation tab writes into the same layer: its transform stays the image's.
    panel = w.panels["Propagate"]
    w.tabs.setCurrentWidget(panel)
    panel.from_ids.setChecked(True)
    panel.ids.setText("1")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=15000)
    assert target in viewer.layers and target.data[0].any() and target.data[4].any()
    np.testing.assert_allclose(target.scale, SCALE)
    np.testing.assert_allclose(target.translate, TRANSLATE)

    chosen = tmp_path / "objects"  # the dialog's name without the ending gets .ome.zarr
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(chosen), ""))
    viewer.layers.selection.active = target
    path = w.save_labels.save()
    assert path == tmp_path / "objects.ome.zarr"
    ms = ngff_attrs(path)["multiscales"][0]
    transforms = ms["datasets"][0]["coordinateTransformations"]
    assert transforms[0]["scale"] == list(SCALE)
    assert transforms[1] == {"type": "translation", "translation": list(TRANSLATE)}
    np.testing.assert_array_equal(zarr.open_group(str(path), mode="r")["0"][...], target.data)
    colours = {c["label-value"]: c["rgba"] for c in ngff_attrs(path)["image-label"]["colors"]}
    assert list(colours) == [1]
    expected = np.round(np.asarray(target.colormap.map(1)).ravel()[:4] * 255)
    np.testing.assert_array_equal(colours[1], expected)

    # Saving again asks first; "No" leaves the labels as they were.
    before = (path / "0" / ".zarray").read_bytes()
    asked = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(path), ""))
    monkeypatch.setattr(QMessageBox, "question",
                        lambda *a, **k: asked.append(a) or QMessageBox.StandardButton.No)
    target.data[3] = 0
    assert w.save_labels.save() is None and len(asked) == 1
    assert zarr.open_group(str(path), mode="r")["0"][3].any()
    assert (path / "0" / ".zarray").read_bytes() == before
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    assert w.save_labels.save() == path
    assert not zarr.open_group(str(path), mode="r")["0"][3].any()
    # A folder that is not OME-Zarr labels is refused even before asking.
    (tmp_path / "mine.ome.zarr").mkdir()
    (tmp_path / "mine.ome.zarr" / "notes.txt").write_text("mine")
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(tmp_path / "mine.ome.zarr"), ""))
    assert w.save_labels.save() is None
    assert "not an OME-Zarr labels image" in w.status.text()
    assert (tmp_path / "mine.ome.zarr" / "notes.txt").read_text() == "mine"
    viewer.layers.selection.active = image
    assert w.save_labels.save() is None and "Select a labels layer" in w.status.text()
