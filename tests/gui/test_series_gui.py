"""The dock's series mode with real key and mouse events, the toy tracker-pair bundle."""

from __future__ import annotations

import numpy as np
import pytest
import tifffile
from qtpy.QtCore import Qt

from conftest import disc
from napari_sam3_onnx.api.series_state import STATE_NAME, SeriesState

from .conftest import open_plugin_widget
from .gui_helpers import Mouse, iou, settle

pytestmark = pytest.mark.gui

#: Three non-square images, two of one size: (shape, blob (row, col, radius)).
IMAGES = {"a": ((300, 517), (90, 140, 22)), "b": ((411, 263), (300, 80, 24)),
          "c": ((411, 263), (120, 190, 20))}


def _write(folder):
    folder.mkdir()
    for name, (shape, (r, c, rad)) in IMAGES.items():
        img = np.zeros(shape, np.uint8)
        img[disc(shape, r, c, rad)] = 220
        tifffile.imwrite(folder / f"{name}.tif", img)


def _truth(name):
    shape, (r, c, rad) = IMAGES[name]
    return disc(shape, r, c, rad)


@pytest.fixture
def series_dock(make_napari_viewer, hf_bundle, tmp_path):
    viewer = make_napari_viewer()
    _dock, w = open_plugin_widget(viewer)
    w.load_bundle(hf_bundle, toy=True)
    _write(tmp_path / "images")
    return viewer, w, tmp_path


def _key(viewer, qtbot, key):
    """A real key press on the viewer's canvas (napari's key handling reads it from there)."""
    canvas = viewer.window._qt_viewer.canvas.native
    canvas.setFocus()
    qtbot.keyClick(canvas, key)
    qtbot.wait(20)


def _click(viewer, qtbot, w, row, col):
    """A real mouse click on the prompt layer at data ``(row, col)``."""
    lay = w.session.layers
    viewer.layers.selection.active = lay.points
    lay.points.mode = "add"
    mouse = Mouse(viewer, qtbot)
    pos = mouse.at(row, col)
    mouse.canvas.events.mouse_press(pos=pos, modifiers=(), button=1)
    mouse.canvas.events.mouse_release(pos=pos, modifiers=(), button=1)
    settle(qtbot, w.session, timeout=20000)


def _image(w):
    return w.series.navigator.layer


def test_next_and_previous_by_keys_and_buttons_save_and_reload(series_dock, qtbot):
    viewer, w, tmp = series_dock
    out = tmp / "out"
    w.series.open(tmp / "images", out=out)
    assert w.series.position.text().startswith("image 1 of 3: a")
    assert _image(w).data.shape == IMAGES["a"][0]
    assert w.session.image is not None and w.session.image.name == "a"

    _click(viewer, qtbot, w, *IMAGES["a"][1][:2])
    assert iou(w.session.layers.preview.data > 0, _truth("a")) > 0.75
    w.commit()
    saved_a = np.asarray(w.session.layers.target.data).copy()
    assert saved_a.any()

    _key(viewer, qtbot, Qt.Key.Key_PageDown)  # next: saves a, shows b
    assert (out / "a.tif").exists()
    np.testing.assert_array_equal(tifffile.imread(out / "a.tif"), saved_a)
    assert w.series.position.text().startswith("image 2 of 3: b")
    assert _image(w).data.shape == IMAGES["b"][0]
    names = [la.name for la in viewer.layers]
    assert "a" not in names and names.count("SAM objects") == 1, names
    assert w.target.currentText() == "SAM objects"  # the plain name, as on the first image
    assert w.series.where.currentText() == "into a folder..."  # what the series was opened with
    assert w.session.layers.target.data.shape == IMAGES["b"][0]
    assert not w.session.layers.target.data.any()  # b is not done: nothing loaded

    calls = w.session.encoder.encoder_calls
    _click(viewer, qtbot, w, *IMAGES["b"][1][:2])  # lands where clicked on the second image
    assert w.session.encoder.encoder_calls == calls + 1  # b encoded, a's embedding not used
    assert iou(w.session.layers.preview.data > 0, _truth("b")) > 0.75
    w.commit()

    qtbot.mouseClick(w.series.next, Qt.MouseButton.LeftButton)  # the button: saves b, shows c
    assert w.series.position.text().startswith("image 3 of 3: c")
    assert not w.series.next.isEnabled()
    _click(viewer, qtbot, w, *IMAGES["c"][1][:2])  # same size as b, blob elsewhere
    preview = w.session.layers.preview.data > 0
    assert iou(preview, _truth("c")) > 0.75
    assert not (preview & disc(IMAGES["b"][0], *IMAGES["b"][1])).any()  # not b's object
    assert not (out / "c.tif").exists()  # a preview only: nothing to save yet
    w.commit()
    _key(viewer, qtbot, Qt.Key.Key_PageDown)  # on the last image: saves it, stays
    assert (out / "c.tif").exists() and w.series.position.text().startswith("image 3 of 3")
    (out / "c.tif").unlink()  # not done any more

    w.session.layers.target.data[...] = 0  # nothing left on c
    _key(viewer, qtbot, Qt.Key.Key_PageUp)  # back to b: c has no labels, nothing saved
    assert not (out / "c.tif").exists()
    assert w.series.position.text().startswith("image 2 of 3: b")
    loaded = np.asarray(w.session.layers.target.data)
    np.testing.assert_array_equal(loaded, tifffile.imread(out / "b.tif"))  # loaded back
    assert iou(loaded > 0, _truth("b")) > 0.75
    _key(viewer, qtbot, Qt.Key.Key_PageUp)
    np.testing.assert_array_equal(np.asarray(w.session.layers.target.data), saved_a)
    target = w.session.layers.target
    target.data[5:9, 5:9] = 9  # painted in place, as napari's brush does
    _key(viewer, qtbot, Qt.Key.Key_PageDown)  # the correction is saved over a.tif
    assert (tifffile.imread(out / "a.tif")[5:9, 5:9] == 9).all()
    _key(viewer, qtbot, Qt.Key.Key_PageUp)
    saved_a[5:9, 5:9] = 9
    assert [w.series.items.item(i).text()[:1] for i in range(3)] == ["\u2713", "\u2713", " "]

    state = SeriesState.load(out / STATE_NAME)
    done = sorted(k for k in state.done if state.is_done(k))
    assert done == sorted(str((tmp / "images" / f"{n}.tif").resolve()) for n in "ab")
    # reopening resumes at the first unfinished image
    w.series.open(tmp / "images", out=out)
    assert w.series.position.text().startswith("image 3 of 3: c")


def test_a_list_click_jumps_and_an_unconfirmed_file_is_not_replaced(series_dock, qtbot,
                                                                    monkeypatch):
    from qtpy.QtWidgets import QMessageBox

    _viewer, w, tmp = series_dock
    out = tmp / "out"
    out.mkdir()
    (out / "a.tif").write_bytes(b"the user's own file")
    w.series.open(tmp / "images", out=out)
    w.session.layers.target.data[10:20, 30:40] = 4  # painted by hand
    answers = [QMessageBox.StandardButton.No]
    asked: list = []
    monkeypatch.setattr(QMessageBox, "question",
                        lambda *a, **k: asked.append(a) or answers[0])
    rect = w.series.items.visualItemRect(w.series.items.item(2))
    qtbot.mouseClick(w.series.items.viewport(), Qt.MouseButton.LeftButton,
                     pos=rect.center())
    assert len(asked) == 1 and "a.tif" in asked[0][2]
    assert (out / "a.tif").read_bytes() == b"the user's own file"  # said no: kept
    assert w.series.position.text().startswith("image 1 of 3")  # and stayed
    answers[0] = QMessageBox.StandardButton.Yes
    qtbot.mouseClick(w.series.items.viewport(), Qt.MouseButton.LeftButton,
                     pos=rect.center())
    assert w.series.position.text().startswith("image 3 of 3: c")
    assert (tifffile.imread(out / "a.tif") == 4).sum() == 100


def test_closing_the_dock_unbinds_the_series_keys(series_dock, qtbot):
    viewer, w, tmp = series_dock
    w.series.open(tmp / "images")
    assert "PageDown" in {str(k) for k in viewer.keymap}
    viewer.window.remove_dock_widget(w.parent() if w.parent() else w)
    qtbot.wait(50)
    assert "PageDown" not in {str(k) for k in viewer.keymap}


def test_labels_are_saved_even_after_the_user_removed_the_series_image(series_dock, qtbot):
    viewer, w, tmp = series_dock
    out = tmp / "out"
    w.series.open(tmp / "images", out=out)
    _click(viewer, qtbot, w, *IMAGES["a"][1][:2])
    w.commit()
    committed = np.asarray(w.session.layers.target.data).copy()
    viewer.layers.remove(_image(w))  # the user deletes the image layer; its labels stay
    qtbot.mouseClick(w.series.next, Qt.MouseButton.LeftButton)
    np.testing.assert_array_equal(tifffile.imread(out / "a.tif"), committed)  # not lost
    assert w.series.position.text().startswith("image 2 of 3: b")


def test_an_image_that_cannot_be_shown_is_said_and_stepped_past(make_napari_viewer, hf_bundle,
                                                                 tmp_path, qtbot):
    viewer = make_napari_viewer()
    _dock, w = open_plugin_widget(viewer)
    folder = tmp_path / "mixed"
    folder.mkdir()
    tifffile.imwrite(folder / "a.tif", np.zeros((40, 70), np.uint8))
    tifffile.imwrite(folder / "b.tif", np.zeros((3, 40, 70), np.uint8))  # a stack
    tifffile.imwrite(folder / "c.tif", np.zeros((50, 30), np.uint8))
    w.series.open(folder)
    _key(viewer, qtbot, Qt.Key.Key_PageDown)
    assert "Cannot show b" in w.status.text() and "2-D images" in w.status.text()
    assert w.series.position.text() == "image 2 of 3: b (0 done, not shown)"
    assert "a" not in [la.name for la in viewer.layers]
    _key(viewer, qtbot, Qt.Key.Key_PageDown)
    assert w.series.position.text().startswith("image 3 of 3: c")
    assert w.session.image is not None and w.session.image.data.shape == (50, 30)


def test_open_folder_asks_for_the_images_then_the_output_folder(series_dock, qtbot,
                                                                monkeypatch):
    from qtpy.QtWidgets import QFileDialog

    _viewer, w, tmp = series_dock
    (tmp / "chosen").mkdir()
    answers = iter([str(tmp / "images"), str(tmp / "chosen")])
    asked: list = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        lambda *a, **k: asked.append(a[1]) or next(answers))
    w.series.where.setCurrentText("into a folder...")
    w.series.format.setCurrentText("npy")
    qtbot.mouseClick(w.series.open_button, Qt.MouseButton.LeftButton)
    assert len(asked) == 2
    series = w.series.navigator.series
    assert series is not None and series.out == tmp / "chosen"
    assert series.target(0) == tmp / "chosen" / "a.npy"
    assert w.series.position.text().startswith("image 1 of 3: a")
