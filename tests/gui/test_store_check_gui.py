"""Attaching an embedding store does not freeze napari, and the last choice wins.

Checking a store against the model hashes the bundle's weight files (about 8 s for a full-size
SAM 3 bundle). Here the digest is replaced by one that waits for the test to release it and
records the thread it ran on; the dock is opened the napari way.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("onnx")

from qtpy.QtCore import QTimer

from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.engine.encoding import SliceEncoder
from napari_sam3_onnx.engine.store import keys
from napari_sam3_onnx.engine.store.lookup import LookupStoreEncoder

from .gui_helpers import blob_stack, iou, settle

pytestmark = pytest.mark.gui

#: How long a held digest waits for the test before it returns on its own (so a digest run on
#: the Qt thread, which the test cannot release, ends the test instead of hanging it).
HOLD_S = 10.0


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return resolve_bundle("toy", tmp_path_factory.mktemp("home"))


class HeldDigest:
    """Stands in for ``bundle_digest``: the first ``held`` calls wait until :meth:`release`."""

    def __init__(self, real, held: int = 1) -> None:
        self.real, self.held = real, held
        self.threads: list[threading.Thread] = []
        self.started, self.returned = threading.Event(), threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, folder):
        with self._lock:
            self.threads.append(threading.current_thread())
            hold = len(self.threads) <= self.held
        if hold:
            self.started.set()
            self._release.wait(HOLD_S)
        digest = self.real(folder)
        if hold:
            self.returned.set()
        return digest

    def release(self) -> None:
        self._release.set()


@pytest.fixture
def held(monkeypatch):
    digest = HeldDigest(keys.bundle_digest)
    monkeypatch.setattr(keys, "bundle_digest", digest)
    yield digest
    digest.release()  # never leave a worker waiting after the test


def dock_with_toy(make_napari_viewer, open_widget, toy):
    stack, truth, centre = blob_stack()
    viewer = make_napari_viewer()
    viewer.add_image(stack, name="blobs", contrast_limits=(0, 3000))
    w = open_widget(viewer)
    w.model.load(toy, toy=True)
    return viewer, w, truth, centre


def watch(w):
    """``(used, finished)``: the stores attached, and the stores whose check came back."""
    used, finished = [], []
    real_use, real_done = w.workspace.use, w.model.check._done

    def use(attachment):
        used.append(attachment.store)
        return real_use(attachment)

    def done(generation, attachment):
        finished.append(attachment.store)
        real_done(generation, attachment)

    w.workspace.use, w.model.check._done = use, done
    return used, finished


def test_the_viewer_keeps_running_while_the_store_is_checked(
        make_napari_viewer, open_widget, qtbot, tmp_path, toy, held):
    viewer, w, truth, centre = dock_with_toy(make_napari_viewer, open_widget, toy)
    ticks: list[int] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    w.model.store.attach(tmp_path / "new.zarr", write=True)
    assert held.started.wait(5)
    seen = len(ticks)
    qtbot.waitUntil(lambda: len(ticks) >= seen + 5, timeout=3000)  # the Qt loop turns...
    assert not held.returned.is_set()  # ...while the digest is still running
    # meanwhile the tabs wait, and say why
    assert w.session.encoder is None and w.model.checking
    for line in (w.status.text(), w.model.info.text()):
        assert "Checking the embedding store new.zarr against the model" in line
    text, prop, auto = (w.panels[t] for t in ("Text", "Propagate", "Automatic"))
    assert not text.run_button.isEnabled() and w.model.checking in text.explain.text()
    assert not prop.run_button.isEnabled() and w.model.checking in prop.note.text()
    assert not auto.run_button.isEnabled() and w.model.checking in auto.explain.text()
    # a click placed now is answered once the store is attached, through the store
    viewer.dims.set_current_step(0, 2)
    row, col, _r = centre(2, "B")
    w.session.layers.points.add([2, row, col])
    qtbot.wait(50)
    assert not np.asarray(w.session.layers.preview.data).any()
    held.release()
    qtbot.waitUntil(lambda: w.model.checking is None, timeout=10000)
    timer.stop()
    assert held.threads and all(t is not threading.main_thread() for t in held.threads)
    encoder = w.session.encoder
    assert isinstance(encoder, LookupStoreEncoder) and encoder.store.path == tmp_path / "new.zarr"
    assert "Embedding store new.zarr attached" in w.status.text()
    assert "Checking" not in w.model.info.text()
    assert text.run_button.isEnabled() and auto.run_button.isEnabled()
    assert "Checking" not in prop.note.text() + text.explain.text() + auto.explain.text()
    settle(qtbot, w.session, timeout=10000)
    assert iou(np.asarray(w.session.layers.preview.data[2]) > 0, truth(2, "B")) > 0.7
    assert encoder.encoder_calls == 1 and encoder.store.writes == 1


@pytest.mark.parametrize("second", ["b.zarr", None], ids=["another store", "memory only"])
def test_the_last_choice_wins_over_a_check_still_running(
        make_napari_viewer, open_widget, qtbot, tmp_path, toy, held, second):
    _viewer, w, _truth, _centre = dock_with_toy(make_napari_viewer, open_widget, toy)
    used, finished = watch(w)
    w.model.store.attach(tmp_path / "a.zarr", write=True)
    assert held.started.wait(5)
    w.model.store.attach(None if second is None else tmp_path / second, write=True)
    want = None if second is None else tmp_path / second
    qtbot.waitUntil(lambda: w.model.checking is None and w.session.encoder is not None,
                    timeout=10000)
    assert w.workspace.store == want
    held.release()  # A's check now ends, after B was chosen
    qtbot.waitUntil(lambda: tmp_path / "a.zarr" in finished, timeout=10000)
    assert tmp_path / "a.zarr" not in used  # A's result was dropped
    assert w.workspace.store == want and w.model.store.path == want
    encoder = w.session.encoder
    if second is None:
        assert type(encoder) is SliceEncoder
    else:
        assert isinstance(encoder, LookupStoreEncoder) and encoder.store.path == want
    assert "Checking" not in w.model.info.text()


def test_a_check_superseded_by_another_model_load_is_dropped(
        make_napari_viewer, open_widget, qtbot, tmp_path, toy, held):
    _viewer, w, _truth, _centre = dock_with_toy(make_napari_viewer, open_widget, toy)
    used, finished = watch(w)
    w.model.store.attach(tmp_path / "a.zarr", write=True)
    assert held.started.wait(5)
    w.model.store.detach()  # memory only, chosen by a load that no longer keeps the store
    w.model.load(toy, toy=True)  # the model again, e.g. on another device
    first = w.session.encoder
    assert type(first) is SliceEncoder and w.model.checking is None
    held.release()
    qtbot.waitUntil(lambda: finished == [tmp_path / "a.zarr"], timeout=10000)
    assert w.session.encoder is first and w.workspace.store is None
    assert tmp_path / "a.zarr" not in used and w.model.store.path is None


def test_an_unexpected_failure_of_the_check_says_what_and_falls_back_to_memory(
        make_napari_viewer, open_widget, qtbot, monkeypatch, tmp_path, toy):
    def unreadable(folder):
        raise PermissionError(f"cannot read {folder}")

    monkeypatch.setattr(keys, "bundle_digest", unreadable)
    _viewer, w, _truth, _centre = dock_with_toy(make_napari_viewer, open_widget, toy)
    w.model.store.attach(tmp_path / "a.zarr", write=True)
    qtbot.waitUntil(lambda: w.model.checking is None, timeout=10000)
    assert "Embedding store not used: PermissionError: cannot read" in w.status.text()
    assert type(w.session.encoder) is SliceEncoder and w.model.store.path is None
    assert w.panels["Text"].run_button.isEnabled()
