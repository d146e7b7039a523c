"""A multi-series TIFF opened by napari's own reader (series 0, a preview): the dock says so.

The dock names the series napari opened and the full-resolution one, and opens that one as a
new layer on a real click, with the file's pixel size; when several series tie for full size it
lists them and opens nothing until one is picked. The user's layer is never changed.
"""

from __future__ import annotations

import numpy as np
import pytest
import tifffile
from qtpy.QtCore import Qt

from .conftest import open_plugin_widget

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: Pixel size of the full-resolution series (rows, cols) in micrometres: asymmetric on purpose.
DY, DX = 0.5, 0.25


def _write(path, *series):
    with tifffile.TiffWriter(path) as tw:
        for data in series:
            tw.write(data, photometric="minisblack", resolution=(1e4 / DX, 1e4 / DY),
                     resolutionunit="CENTIMETER")


def _stack(shape=(3, 60, 90), seed=0):
    return np.random.default_rng(seed).integers(0, 4000, shape, dtype=np.uint16)


def _images(viewer):
    from napari.layers import Image

    return [la.name for la in viewer.layers if isinstance(la, Image)]


def _open(make_napari_viewer, qtbot, path):
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(path))  # napari's built-in reader: series 0
    _dock, widget = open_plugin_widget(viewer)
    hint = widget.series_hint
    qtbot.waitUntil(lambda: hint.isVisibleTo(widget), timeout=3000)
    return viewer, layer, widget, hint


def test_preview_series_hint_opens_full_resolution(make_napari_viewer, qtbot, tmp_path):
    preview = np.arange(32 * 32, dtype=np.uint16).reshape(32, 32)
    stack = _stack()
    path = tmp_path / "preview-first.tif"
    _write(path, preview, stack)
    viewer, layer, widget, hint = _open(make_napari_viewer, qtbot, path)
    assert layer.data.shape == (32, 32)  # what napari opened: the preview
    text = hint.text.text()
    assert "series 0 (32x32" in text and "full-resolution one is series 1 (3x60x90" in text
    assert hint.button.isEnabled() and "series 1" in hint.button.text()

    before = _images(viewer)
    qtbot.mouseClick(hint.button, Qt.MouseButton.LeftButton)
    assert len(_images(viewer)) == len(before) + 1
    new = viewer.layers["preview-first (series 1)"]
    np.testing.assert_array_equal(np.asarray(new.data), stack)
    np.testing.assert_allclose(new.scale[-2:], (DY, DX))
    assert new.scale[0] == 1.0
    # the user's layer is untouched, and the dock now works on the full-resolution series
    np.testing.assert_array_equal(layer.data, preview)
    assert tuple(layer.scale) == (1.0, 1.0)
    assert layer in viewer.layers
    assert widget.image.currentData().name == new.name
    qtbot.waitUntil(lambda: not hint.isVisibleTo(widget), timeout=3000)


def test_tied_full_size_series_are_listed_and_nothing_guessed(make_napari_viewer, qtbot,
                                                              tmp_path):
    preview = np.zeros((32, 32), np.uint16)
    first, second = _stack(seed=1), _stack(seed=2)
    path = tmp_path / "two-positions.tif"
    _write(path, preview, first, second)
    viewer, layer, _widget, hint = _open(make_napari_viewer, qtbot, path)
    text = hint.text.text()
    assert "series 0 (32x32" in text and "Series 1, 2 are all full-size" in text
    assert "series 1 (3x60x90" in text and "series 2 (3x60x90" in text
    assert not hint.button.isEnabled()  # no choice made: nothing to open
    before = _images(viewer)
    qtbot.mouseClick(hint.button, Qt.MouseButton.LeftButton)
    assert _images(viewer) == before

    hint.choice.setCurrentIndex(hint.choice.findData(2))
    assert hint.button.isEnabled()
    qtbot.mouseClick(hint.button, Qt.MouseButton.LeftButton)
    assert len(_images(viewer)) == len(before) + 1
    new = viewer.layers["two-positions (series 2)"]
    np.testing.assert_array_equal(np.asarray(new.data), second)
    np.testing.assert_allclose(new.scale[-2:], (DY, DX))
    np.testing.assert_array_equal(layer.data, preview)


def test_large_series_opens_lazily(make_napari_viewer, qtbot, tmp_path, monkeypatch):
    from napari_sam3_onnx._napari import series_hint

    monkeypatch.setattr(series_hint, "IN_MEMORY_BYTES", 0)  # every series counts as large
    stack = _stack()
    path = tmp_path / "big.tif"
    _write(path, np.zeros((32, 32), np.uint16), stack)
    viewer, _layer, _widget, hint = _open(make_napari_viewer, qtbot, path)
    qtbot.mouseClick(hint.button, Qt.MouseButton.LeftButton)
    new = viewer.layers["big (series 1)"]
    assert not isinstance(new.data, np.ndarray)  # read plane by plane, not loaded whole
    np.testing.assert_array_equal(np.asarray(new.data[2]), stack[2])
