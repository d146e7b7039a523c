"""A new user's first hour (issue 27): no stall on load, markers that show what is sent, no silence.

The dock is opened the napari way; the shipped toy is the model.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from qtpy.QtCore import Qt
from qtpy.QtWidgets import QPushButton

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET

pytestmark = pytest.mark.gui


@pytest.fixture
def toy_folder():
    from napari_sam3_onnx.api.bundle_fetch import fetch_bundle
    from napari_sam3_onnx.models.registry import get_bundle

    return fetch_bundle(get_bundle("toy"))


@pytest.fixture
def sample_dock(make_napari_viewer):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "synthetic_nuclei")
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    return viewer, widget


def test_browse_opens_the_bundle_and_reads_its_tokenizer_in_a_worker(sample_dock, toy_folder,
                                                                      qtbot, monkeypatch):
    from napari_sam3_onnx._napari.model import panel as model_panel
    from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer

    _viewer, w = sample_dock
    threads = {"open": [], "tokenizer": []}
    opener, reader = model_panel.open_checked, ClipTokenizer.from_folder.__func__

    def open_checked(*args):
        threads["open"].append(threading.current_thread())
        return opener(*args)

    def from_folder(cls, *args, **kwargs):
        threads["tokenizer"].append(threading.current_thread())
        return reader(cls, *args, **kwargs)

    monkeypatch.setattr(model_panel, "open_checked", open_checked)
    monkeypatch.setattr(ClipTokenizer, "from_folder", classmethod(from_folder))
    monkeypatch.setattr(model_panel.QFileDialog, "getExistingDirectory",
                        staticmethod(lambda *a, **k: str(toy_folder)))
    browse = next(b for b in w.model.findChildren(QPushButton) if b.text() == "Browse...")
    qtbot.mouseClick(browse, Qt.MouseButton.LeftButton)
    assert w.model.adapter is None and "Opening" in w.model.info.text()  # not opened yet
    qtbot.waitUntil(lambda: w.model.adapter is not None, timeout=20000)
    w.tabs.setCurrentWidget(w.panels["Text"])  # the Text tab needs the tokenizer
    assert w.panels["Text"].run_button.isEnabled()
    main = threading.main_thread()
    assert threads["open"] and all(t is not main for t in threads["open"]), threads
    assert threads["tokenizer"] and all(t is not main for t in threads["tokenizer"]), threads


def test_a_later_pick_supersedes_a_load_still_opening(sample_dock, toy_folder, qtbot, tmp_path):
    _viewer, w = sample_dock
    w.model.load_in_background(tmp_path)  # not a bundle: would fail
    w.model.load_in_background(toy_folder)
    qtbot.waitUntil(lambda: w.model.adapter is not None, timeout=20000)
    qtbot.wait(200)
    assert w.model.adapter is not None and "Not loaded" not in w.model.info.text()


def _symbols(points) -> list[str]:
    return [getattr(s, "value", s) for s in points.symbol]


def test_t_after_a_click_keeps_that_points_symbol_and_polarity(sample_dock, qtbot):
    from .gui_helpers import Mouse, settle

    viewer, w = sample_dock
    w.model.load_toy()
    lay = w.session.layers
    viewer.layers.selection.active = lay.points
    lay.points.mode = "add"
    z = int(viewer.dims.current_step[0])
    mouse = Mouse(viewer, qtbot)
    keys = viewer.window._qt_viewer._key_map_handler

    def click(r, c):
        pos = mouse.at(r, c)
        mouse.canvas.events.mouse_press(pos=pos, modifiers=(), button=1)
        mouse.canvas.events.mouse_release(pos=pos, modifiers=(), button=1)
        settle(qtbot, w.session, timeout=10000)

    click(60, 100)
    assert len(lay.points.data) == 1 and lay.points.data[0][0] == z
    keys.press_key("t")  # the next click is negative
    assert _symbols(lay.points) == ["disc"]  # the point placed stays what it is: positive
    assert list(lay.points.features["positive"]) == [True]
    click(70, 120)
    assert _symbols(lay.points) == ["disc", "cross"]
    assert list(lay.points.features["positive"]) == [True, False]
    keys.press_key("t")
    assert _symbols(lay.points) == ["disc", "cross"]


def test_a_click_with_no_model_says_so(sample_dock, qtbot):
    from .gui_helpers import settle

    viewer, w = sample_dock
    assert w.model.adapter is None
    z = int(viewer.dims.current_step[0])
    w.session.layers.points.add([z, 60, 100])
    settle(qtbot, w.session)
    assert w.session.messages and "No model is loaded" in w.session.messages[-1]
    assert len(w.session.layers.points.data) == 1  # the click stays for when one is loaded


def test_propagation_says_where_another_id_kept_the_objects_pixels(make_widget, qtbot):
    from .test_propagation_gui import BLOB_A, centre, click, open_tab, run_and_wait, scene
    from .test_propagation_gui import truth as blob_truth

    viewer, w, panel = open_tab(make_widget, scene(BLOB_A))
    ids = click(qtbot, viewer, w, 5, centre(BLOB_A, 5))
    target = w.session.layers.target
    target.data[6][blob_truth(BLOB_A, 6)] = 9  # the same blob already has id 9 on z=6
    panel.from_ids.setChecked(True)
    panel.ids.setText(",".join(map(str, ids)))
    run_and_wait(qtbot, panel)
    said = w.status.text()
    assert "z=6" in said and "id 9" in said and "Overwrite other objects" in said, said
    assert (target.data[6][blob_truth(BLOB_A, 6)] == 9).all()  # kept, as said


def test_an_offline_download_fails_at_once_with_a_complete_first_line(sample_dock, qtbot,
                                                                       monkeypatch, tmp_path):
    import socket

    from napari_sam3_onnx.models import download
    from napari_sam3_onnx.models.registry import KNOWN_BUNDLES

    _viewer, w = sample_dock
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    said, started = [], []
    monkeypatch.setattr(w.model, "_notify", said.append)

    def no_network(address, timeout=None, *args, **kwargs):
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(download, "download_bundle", lambda *a, **k: started.append(a))
    spec = next(s for s in KNOWN_BUNDLES if s.downloadable and not s.builder)
    w.model.start_download(spec)
    qtbot.waitUntil(lambda: bool(said), timeout=10000)
    assert not started  # the library's ~25 s of retries never began
    first = said[-1][:90]  # what a contracted notification shows
    assert first.startswith("No connection to ") and spec.title in said[-1], said
    assert "name resolution" in first
    qtbot.waitUntil(lambda: w.model.download.isEnabled(), timeout=5000)


def test_a_saved_ome_zarr_reopens_as_labels_with_its_scale_and_units(sample_dock, qtbot,
                                                                     tmp_path, monkeypatch):
    from napari.layers import Labels
    from qtpy.QtWidgets import QFileDialog

    from napari_sam3_onnx._napari.sample_data import SCALE

    viewer, w = sample_dock
    image = viewer.layers["synthetic nuclei"]
    labels = viewer.add_labels(np.zeros(image.data.shape, np.int32), name="nuclei",
                               scale=image.scale, units=image.units)
    labels.data[4:7, 40:70, 60:120] = 3
    viewer.layers.selection.active = labels
    chosen = tmp_path / "nuclei.ome.zarr"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(chosen), ""))
    assert w.save_labels.save() == chosen
    viewer.layers.clear()
    opened = viewer.open(str(chosen), plugin=None)  # no plugin named, as File > Open does
    assert [type(la) for la in opened] == [Labels]
    back = opened[0]
    np.testing.assert_allclose(back.scale, SCALE)
    assert [str(u) for u in back.units] == ["micrometer"] * 3
    level0 = back.data[0] if back.multiscale else back.data
    np.testing.assert_array_equal(np.asarray(level0), labels.data)


def test_a_saved_ome_tiff_reopens_as_labels_with_its_scale_and_units(sample_dock, qtbot,
                                                                     tmp_path, monkeypatch):
    from napari.layers import Labels
    from qtpy.QtWidgets import QFileDialog

    from napari_sam3_onnx._napari.sample_data import SCALE
    from napari_sam3_onnx._napari.save_labels import FILTERS

    viewer, w = sample_dock
    image = viewer.layers["synthetic nuclei"]
    labels = viewer.add_labels(np.zeros(image.data.shape, np.int32), name="nuclei",
                               scale=image.scale, units=image.units)
    labels.data[4:7, 40:70, 60:120] = 3
    viewer.layers.selection.active = labels
    tiff = next(f for f in FILTERS if "TIFF" in f)  # no ending typed: the filter's is added
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(tmp_path / "nuclei"), tiff))
    chosen = tmp_path / "nuclei.ome.tif"
    assert w.save_labels.save() == chosen
    viewer.layers.clear()
    opened = viewer.open(str(chosen), plugin=None)  # no plugin named, as File > Open does
    assert [type(la) for la in opened] == [Labels]
    back = opened[0]
    np.testing.assert_allclose(back.scale, SCALE)
    assert [str(u) for u in back.units] == ["micrometer"] * 3
    np.testing.assert_array_equal(np.asarray(back.data), labels.data)


def test_small_things_evaluate_defaults_settings_words_status_and_hint(sample_dock, qtbot):
    from napari_sam3_onnx._napari.automatic.output import PREVIEW

    viewer, w = sample_dock
    text = w.panels["Text"]
    assert "wkentaro" not in text.explain.text() and "Download" in text.explain.text()
    w.model.load_toy()
    auto = w.panels["Automatic"]
    w.tabs.setCurrentWidget(auto)
    image = viewer.layers["synthetic nuclei"]
    viewer.add_labels(np.zeros(image.data.shape, np.int32), name="mine")
    viewer.add_labels(np.zeros(image.data.shape, np.int32), name="truth")
    viewer.add_labels(np.zeros(image.data.shape, np.int32), name=PREVIEW)
    auto._layers_changed()
    names = [auto.pred_layer.itemText(i) for i in range(auto.pred_layer.count())]
    assert PREVIEW not in names and "SAM preview" not in names, names
    assert auto.pred_layer.currentData() is not auto.truth_layer.currentData()
    tips = auto.settings.stability_score_thresh.toolTip()
    assert "stability_score_thresh" in tips and "nothing is found" in tips
    w.status.setText("Segmenting 12 slice(s)...")
    w.tabs.setCurrentWidget(w.panels["Text"])
    assert w.status.text() == ""  # another tab's news does not linger

