"""Closing the dock and opening it again: the attached store is shown, a load in flight is dropped.

The dock is opened and closed the napari way (``add_plugin_dock_widget``,
``remove_dock_widget``); the viewer keeps its workspace (``_napari/kept.py``), so the reopened
dock must show what that workspace holds: the model and the embedding store it reads. A bundle
load still running when its dock closes is dropped when it ends (the reopened dock shows the
model it had, never a half-attached one), and nothing raises on the closed dock's widgets.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.model import panel as panel_module
from napari_sam3_onnx._napari.model.store_row import MEMORY_ONLY
from napari_sam3_onnx.api.bundles import resolve_bundle

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return resolve_bundle("toy", tmp_path_factory.mktemp("home"))


def _dock(viewer):
    return viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)


def _close(qtbot, viewer, dock, w) -> None:
    viewer.window.remove_dock_widget(dock)
    qtbot.wait(50)
    assert w.session.closed


def test_the_reopened_dock_shows_the_attached_store(make_napari_viewer, qtbot, tmp_path, toy):
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros((3, 50, 70), np.uint16), name="stack")
    dock, w = _dock(viewer)
    w.model.load(toy, toy=True)
    store = tmp_path / "emb.zarr"
    w.model.store.attach(store, write=True)
    qtbot.waitUntil(lambda: w.model.checking is None, timeout=30000)
    assert w.workspace.store == store
    encoder = w.workspace.encoder
    _close(qtbot, viewer, dock, w)

    _dock2, w2 = _dock(viewer)
    row = w2.model.store
    assert row.path == store  # was None: the row read "Memory only"
    assert row.choice.currentText() == "emb.zarr" != MEMORY_ONLY
    assert row.write.isChecked()
    assert w2.model.checking is None  # shown as attached, not checked again
    assert w2.workspace.store == store and w2.workspace.encoder is encoder


def test_the_reopened_dock_shows_a_read_only_store_as_read_only(make_napari_viewer, qtbot,
                                                                tmp_path, toy):
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros((3, 50, 70), np.uint16), name="stack")
    dock, w = _dock(viewer)
    w.model.load(toy, toy=True)
    w.model.store.attach(tmp_path / "ro.zarr", write=True)  # created (write), then...
    qtbot.waitUntil(lambda: w.model.checking is None, timeout=30000)
    w.model.store.write.setChecked(False)  # ...read only: checked again
    qtbot.waitUntil(lambda: w.model.checking is None, timeout=30000)
    _close(qtbot, viewer, dock, w)
    _dock2, w2 = _dock(viewer)
    assert w2.model.store.path == tmp_path / "ro.zarr"
    assert not w2.model.store.write.isChecked()


class HeldOpen:
    """Stands in for the panel's ``open_checked``: in a worker, waits for :meth:`release`."""

    def __init__(self, real) -> None:
        self.real = real
        self.started, self.returned = threading.Event(), threading.Event()
        self._release = threading.Event()

    def __call__(self, folder, config):
        if threading.current_thread() is threading.main_thread():
            return self.real(folder, config)  # a load on the Qt thread is not held
        self.started.set()
        self._release.wait(10.0)
        try:
            return self.real(folder, config)
        finally:
            self.returned.set()

    def release(self) -> None:
        self._release.set()


@pytest.fixture
def held_open(monkeypatch):
    held = HeldOpen(panel_module.open_checked)
    monkeypatch.setattr(panel_module, "open_checked", held)
    yield held
    held.release()


def test_a_load_running_when_the_dock_closes_is_dropped(make_napari_viewer, qtbot, toy,
                                                        held_open):
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros((3, 50, 70), np.uint16), name="stack")
    dock, w = _dock(viewer)
    w.model.load_in_background(toy)  # what Browse does
    assert held_open.started.wait(5)
    _close(qtbot, viewer, dock, w)
    held_open.release()
    assert held_open.returned.wait(30)
    qtbot.wait(200)  # the worker's result reaches the Qt thread (and must do nothing)
    assert w.workspace.adapter is None  # not attached behind the user's back

    _dock2, w2 = _dock(viewer)
    assert w2.model.adapter is None
    assert w2.model.folder.text() == ""  # the new dock shows no half-loaded model
    w2.model.load(toy, toy=True)  # and loads normally
    assert w2.model.adapter is not None


def test_a_load_running_when_the_dock_closes_leaves_the_kept_model(make_napari_viewer, qtbot,
                                                                    toy, held_open):
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros((3, 50, 70), np.uint16), name="stack")
    dock, w = _dock(viewer)
    w.model.load(toy, toy=True)  # on the Qt thread: not held
    adapter = w.model.adapter
    w.model.load_in_background(toy)  # a second load, in flight when the dock closes
    assert held_open.started.wait(5)
    _close(qtbot, viewer, dock, w)
    held_open.release()
    assert held_open.returned.wait(30)
    qtbot.wait(200)
    _dock2, w2 = _dock(viewer)
    assert w2.model.adapter is adapter  # the model the dock had, kept
    assert "Toy" in w2.model.folder.text()
