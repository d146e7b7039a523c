"""The dock's "Save labels...": every format, and nothing the user did not confirm is replaced.

The layer is saved through the dock opened the napari way. A ``.npy`` keeps no geometry and says
so; an existing ``.npy`` is replaced only after "Yes" (its sidecar with it); a sidecar without
its labels file, a folder under a ``.tif`` name or a layer in pixel units are not mistaken for
something else.
"""

from __future__ import annotations

import numpy as np
import pytest
import tifffile

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.save_labels import FILTERS, refusal, target_for
from napari_sam3_onnx._napari.tiff_labels_reader import get_reader, read_labels
from napari_sam3_onnx.api.provenance import sidecar


@pytest.fixture
def dock_with_labels(make_napari_viewer):
    viewer = make_napari_viewer()
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    data = np.zeros((3, 40, 70), np.int32)  # asymmetric, non-square
    data[1, 5:20, 30:60] = 7
    layer = viewer.add_labels(data, name="cells", scale=(2.0, 0.5, 0.25))
    viewer.layers.selection.active = layer
    return viewer, widget, layer


def _choose(monkeypatch, path, chosen_filter=""):
    from qtpy.QtWidgets import QFileDialog

    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(path), chosen_filter))


def _answer(monkeypatch, yes: bool) -> list:
    from qtpy.QtWidgets import QMessageBox

    asked: list = []
    answer = QMessageBox.StandardButton.Yes if yes else QMessageBox.StandardButton.No
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a) or answer)
    return asked


def test_the_filter_gives_the_ending_and_each_format_is_written(dock_with_labels, tmp_path,
                                                                 monkeypatch):
    _viewer, w, layer = dock_with_labels
    said = {}
    for chosen_filter, ending in FILTERS.items():
        _choose(monkeypatch, tmp_path / "cells", chosen_filter)
        path = w.save_labels.save()
        assert path == tmp_path / f"cells{ending}"
        assert path.exists()
        said[ending] = w.status.text()
    assert "npy does not keep the layer's scale" in said[".npy"]
    assert "does not keep" not in said[".ome.tif"] + said[".ome.zarr"]
    assert target_for(tmp_path / "a.tif", "cells") == tmp_path / "a.ome.tif"
    assert target_for(tmp_path / "a.TIFF", "cells") == tmp_path / "a.ome.TIFF"
    assert target_for(tmp_path / "a.ome.tif", "cells") == tmp_path / "a.ome.tif"
    np.testing.assert_array_equal(np.load(tmp_path / "cells.npy"), layer.data)
    assert np.load(tmp_path / "cells.npy").dtype == np.int32


def test_an_existing_npy_is_replaced_only_after_yes(dock_with_labels, tmp_path, monkeypatch):
    _viewer, w, layer = dock_with_labels
    path = tmp_path / "cells.npy"
    np.save(path, np.ones((2, 2), np.int8))
    before = path.read_bytes()
    _choose(monkeypatch, path)
    asked = _answer(monkeypatch, yes=False)
    assert w.save_labels.save() is None and len(asked) == 1
    assert path.read_bytes() == before
    _answer(monkeypatch, yes=True)
    assert w.save_labels.save() == path
    np.testing.assert_array_equal(np.load(path), layer.data)


def test_a_lone_sidecar_or_a_folder_is_refused_before_asking(dock_with_labels, tmp_path,
                                                              monkeypatch):
    _viewer, w, _layer = dock_with_labels
    lone = sidecar(tmp_path / "cells.npy")
    lone.write_text("the user's notes")
    assert refusal(tmp_path / "cells.npy") is not None
    _choose(monkeypatch, tmp_path / "cells.npy")
    asked = _answer(monkeypatch, yes=True)
    assert w.save_labels.save() is None and not asked
    assert lone.read_text() == "the user's notes" and not (tmp_path / "cells.npy").exists()
    (tmp_path / "folder.ome.tif").mkdir()
    _choose(monkeypatch, tmp_path / "folder.tif")
    assert w.save_labels.save() is None and not asked and "not a file" in w.status.text()
    assert target_for(tmp_path / "x.zarr", "cells") == tmp_path / "x.ome.zarr"


def test_only_our_labels_tiffs_are_read_as_labels_and_pixel_units_stay_unnamed(
        dock_with_labels, tmp_path, monkeypatch):
    viewer, w, layer = dock_with_labels
    foreign = tmp_path / "theirs.ome.tif"
    tifffile.imwrite(foreign, np.zeros((3, 40, 70), np.int32), ome=True)
    assert get_reader(str(foreign)) is None
    plain = tmp_path / "plain.tif"  # any other TIFF opens without a choice of reader
    tifffile.imwrite(plain, np.zeros((3, 40, 70), np.uint16))
    assert len(viewer.open(str(plain), plugin=None)) == 1
    viewer.layers.selection.active = layer
    _choose(monkeypatch, tmp_path / "cells.tif")
    path = w.save_labels.save()
    assert path == tmp_path / "cells.ome.tif"
    assert get_reader(str(path)) is read_labels
    ((data, kwargs, kind),) = read_labels(path)
    assert kind == "labels" and kwargs["scale"] == [2.0, 0.5, 0.25]
    assert "units" not in kwargs  # the layer is in pixels: no micrometres are claimed
    np.testing.assert_array_equal(data, layer.data)
