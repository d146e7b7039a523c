"""A background bundle load leaves the Qt thread only the attaching (issue 27, item 3).

The dock opened the napari way; the shipped toy and the suite's hf bundle as models.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.model import panel as model_panel

pytestmark = pytest.mark.gui


@pytest.fixture
def toy_folder():
    from napari_sam3_onnx.api.bundle_fetch import fetch_bundle
    from napari_sam3_onnx.models.registry import get_bundle

    return fetch_bundle(get_bundle("toy"))


@pytest.fixture
def dock(make_napari_viewer):
    viewer = make_napari_viewer()
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    return widget


def test_the_model_line_is_worked_out_in_the_worker(dock, toy_folder, qtbot, monkeypatch):
    threads: list[threading.Thread] = []
    real = model_panel.bundle_words

    def words(*args):
        threads.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(model_panel, "bundle_words", words)
    dock.model.load_in_background(toy_folder, toy=True)
    qtbot.waitUntil(lambda: dock.model.adapter is not None, timeout=20000)
    assert threads and all(t is not threading.main_thread() for t in threads)
    assert dock.model.folder.text() == "Toy model (not SAM 3)"
    assert "TOY TEST MODEL" in dock.model.info.text()
    assert dock.model.folder.toolTip() == str(toy_folder.resolve())


def test_a_load_on_the_qt_thread_supersedes_one_still_in_the_worker(dock, toy_folder,
                                                                   hf_bundle, qtbot,
                                                                   monkeypatch):
    release, returned = threading.Event(), threading.Event()
    real = model_panel.open_checked

    def held(folder, config):
        if threading.current_thread() is threading.main_thread():
            return real(folder, config)
        release.wait(10.0)
        try:
            return real(folder, config)
        finally:
            returned.set()

    monkeypatch.setattr(model_panel, "open_checked", held)
    dock.model.load_in_background(hf_bundle)  # Browse: held in the worker
    dock.model.load(toy_folder, toy=True)  # e.g. the Download menu's toy, on the Qt thread
    release.set()
    assert returned.wait(30)
    qtbot.wait(300)  # the worker's result reaches the Qt thread and must not count
    assert dock.model.bundle_folder == toy_folder
    assert dock.model.folder.text() == "Toy model (not SAM 3)"
    assert dock.model.workspace.folder == toy_folder  # the toy's model, not hf's
