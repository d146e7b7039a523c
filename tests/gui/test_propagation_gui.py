"""The Propagate tab in a real viewer: memory (pagarcia test graphs) and carry-over (hf toy)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from napari_sam3_onnx.engine.tracking.propagation import STACK_NEEDED
from napari_sam3_onnx.testing.pagarcia import build_pagarcia

from .gui_helpers import iou, settle

pytestmark = pytest.mark.gui

Z, ROWS, COLS = 12, 60, 90
#: (row at z=0, col at z=0, rows per slice, cols per slice, radius, slices present)
BLOB_A = (12.0, 14.0, 1.0, 3.2, 6, range(Z))
BLOB_B = (48.0, 80.0, -0.5, -3.0, 6, range(Z))


@pytest.fixture(scope="module")
def pagarcia_bundle(tmp_path_factory):
    return build_pagarcia(tmp_path_factory.mktemp("pagarcia"))


def centre(blob, z):
    return blob[0] + blob[2] * z, blob[1] + blob[3] * z


def truth(blob, z):
    rr, cc = np.mgrid[:ROWS, :COLS]
    r, c = centre(blob, z)
    return (z in blob[5]) & ((rr - r) ** 2 + (cc - c) ** 2 <= blob[4] ** 2)


def scene(*blobs, nz=Z):
    stack = np.zeros((nz, ROWS, COLS), np.uint16)
    for z in range(nz):
        for b in blobs:
            stack[z][truth(b, z)] = 3000
    return stack


def open_tab(make_widget, data, bundle=None):
    viewer, _image, w = make_widget(data)
    if bundle is not None:
        w.load_bundle(bundle)
    panel = w.panels["Propagate"]
    w.tabs.setCurrentWidget(panel)
    return viewer, w, panel


def click(qtbot, viewer, w, z, rc, commit=True):
    viewer.dims.set_current_step(0, z)
    w.session.layers.points.add([z, *rc])
    settle(qtbot, w.session)
    if not commit:
        return []
    ids = w.commit()
    settle(qtbot, w.session)
    return ids


def run_and_wait(qtbot, panel, start=None, timeout=15000):
    assert (start or panel.run)()
    qtbot.waitUntil(lambda: not panel.running, timeout=timeout)


def use_ids(panel, text):
    panel.from_ids.setChecked(True)
    panel.ids.setText(text)


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_committed_blob_is_followed_both_ways(make_widget, qtbot, pagarcia_bundle, name):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A),
                                pagarcia_bundle if name == "pagarcia" else None)
    method = "SAM memory" if name == "pagarcia" else "prompt carry-over"
    assert method in panel.method.text()
    assert panel.run_button.isEnabled() and panel.note.isHidden()
    assert click(qtbot, viewer, w, 5, centre(BLOB_A, 5)) == [1]
    target = w.session.layers.target
    committed = target.data.copy()
    use_ids(panel, "1")
    run_and_wait(qtbot, panel)
    labels = target.data.copy()
    assert set(np.unique(labels)) == {0, 1}
    for z in range(Z):
        assert iou(labels[z] == 1, truth(BLOB_A, z)) > 0.7, z
    assert "object 1 — up: range end at z=11; down: range end at z=0" in panel.status.text()
    assert method in panel.status.text()
    # one encode per slice: the seed slice's came from the clicks, shared through the cache
    assert "12 slice(s) processed (11 newly encoded, 1 from the cache)" in panel.status.text()
    assert w.session.encoder.encoder_calls == Z
    target.undo()  # one undo step removes the whole run ...
    assert np.array_equal(target.data, committed)
    target.undo()  # ... and the next one the commit
    assert not target.data.any()
    target.redo()
    target.redo()
    assert np.array_equal(target.data, labels)


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_vanishing_object_stops_where_it_vanishes(make_widget, qtbot, pagarcia_bundle, name):
    blob = (*BLOB_A[:5], range(0, 9))
    viewer, w, panel = open_tab(make_widget, scene(blob),
                                pagarcia_bundle if name == "pagarcia" else None)
    click(qtbot, viewer, w, 3, centre(blob, 3))
    panel.from_all.setChecked(True)
    run_and_wait(qtbot, panel)
    labels = w.session.layers.target.data
    for z in range(9):
        assert iou(labels[z] == 1, truth(blob, z)) > 0.7, z
    assert not labels[9:].any()
    text = panel.status.text()
    assert "up: absent 2 slices in a row, stopped at z=10, last seen z=8" in text
    assert "down: range end at z=0" in text


def test_two_objects_keep_their_ids_and_others_are_not_overwritten(make_widget, qtbot):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A, BLOB_B))
    target = w.session.layers.target
    click(qtbot, viewer, w, 4, centre(BLOB_A, 4))
    click(qtbot, viewer, w, 4, centre(BLOB_B, 4))
    other = np.zeros((ROWS, COLS), bool)  # a user's object sitting on blob A at z=8
    other[18:22, 36:44] = True
    target.data[8][other] = 9
    panel.from_all.setChecked(True)
    viewer.dims.set_current_step(0, 4)
    run_and_wait(qtbot, panel)
    labels = target.data
    assert set(np.unique(labels)) == {0, 1, 2, 9}
    for z in range(Z):
        a = truth(BLOB_A, z) & ~(other if z == 8 else False)
        assert iou(labels[z] == 1, a) > 0.7, z
        assert iou(labels[z] == 2, truth(BLOB_B, z)) > 0.7, z
    assert (labels[8][other] == 9).all()
    assert ("objects 1, 2 — up: range end at z=11; down: range end at z=0."
            in panel.status.text())
    assert w.session.encoder.encoder_calls == Z  # shared by both objects


def held_encoder(monkeypatch, adapter, hold_at):
    """Make the adapter's ``hold_at``-th encode wait until the returned event is set."""
    encode, calls, gate = adapter.encode, [], threading.Event()

    def held(rgb):
        calls.append(1)
        if len(calls) == hold_at:
            assert gate.wait(10)
        return encode(rgb)

    monkeypatch.setattr(adapter, "encode", held)
    return gate


def test_cancel_keeps_finished_slices_and_one_undo_removes_the_run(
        make_widget, qtbot, monkeypatch):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A))
    click(qtbot, viewer, w, 5, centre(BLOB_A, 5))  # the seed slice is encoded before
    gate = held_encoder(monkeypatch, w.model.adapter, 3)  # slices 6, 7, then 8 waits
    target = w.session.layers.target
    before = target.data.copy()
    written = []
    panel.runner.slice_written.connect(written.append)
    use_ids(panel, "1")
    panel.direction.setCurrentIndex(1)  # up only
    assert panel.run()
    qtbot.waitUntil(lambda: len(written) >= 3, timeout=10000)
    panel.cancel()  # while slice 8 is being encoded: it completes, slice 9 is never begun
    gate.set()
    qtbot.waitUntil(lambda: not panel.running, timeout=10000)
    assert "Cancelled" in panel.status.text()
    done = sorted(set(written))
    assert done == [5, 6, 7, 8]
    assert "cancelled at z=8" in panel.status.text()
    labels = target.data.copy()
    for z in done:  # every finished slice is complete ...
        assert iou(labels[z] == 1, truth(BLOB_A, z)) > 0.7, z
    untouched = [z for z in range(Z) if z not in done]
    assert np.array_equal(labels[untouched], before[untouched])  # ... the others untouched
    target.undo()  # one undo step removes the whole run
    assert np.array_equal(target.data, before)
    target.redo()
    assert np.array_equal(target.data, labels)


def test_preview_object_is_carried_under_a_new_id(make_widget, qtbot, pagarcia_bundle):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A, BLOB_B), pagarcia_bundle)
    click(qtbot, viewer, w, 3, centre(BLOB_A, 3))  # id 1
    assert panel.from_preview.isChecked()
    assert not panel.run()  # committed, so nothing is previewed: a message, no run
    assert "no previewed object" in panel.status.text() and not panel.running
    click(qtbot, viewer, w, 7, centre(BLOB_B, 7), commit=False)
    run_and_wait(qtbot, panel)
    lay = w.session.layers
    for z in range(Z):
        assert iou(lay.target.data[z] == 2, truth(BLOB_B, z)) > 0.7, z
    assert len(lay.points.data) == 0  # the preview became the seed, as a commit would
    settle(qtbot, w.session)
    assert not lay.preview.data.any()


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_correction_recomputes_between_seeds(make_widget, qtbot, pagarcia_bundle, name):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A, BLOB_B),
                                pagarcia_bundle if name == "pagarcia" else None)
    target = w.session.layers.target
    click(qtbot, viewer, w, 2, centre(BLOB_A, 2))
    use_ids(panel, "1")
    run_and_wait(qtbot, panel)
    first = target.data.copy()
    assert panel.correct_button.isEnabled()
    k = 7  # the user says: from slice 7 on, object 1 is the other blob
    click(qtbot, viewer, w, k, centre(BLOB_B, k), commit=False)
    run_and_wait(qtbot, panel, panel.repropagate)
    labels = target.data
    assert set(np.unique(labels)) == {0, 1}
    assert np.array_equal(labels[:k], first[:k])  # before the correction: unchanged
    for z in range(k, Z):  # from it on: replaced, not layered on top
        assert iou(labels[z] == 1, truth(BLOB_B, z)) > 0.7, z
        assert not (labels[z] == 1)[truth(BLOB_A, z)].any(), z
    assert [s.index for s in panel.last.spec.seeds[1]] == [2, k]
    target.undo()  # the re-run is one step
    assert np.array_equal(target.data, first)


def test_4d_walks_the_chosen_axis_at_the_current_position(make_widget, qtbot):
    stack = scene(BLOB_A)
    tz = np.stack([stack, np.zeros_like(stack), stack])  # (T=3, Z, rows, cols)
    viewer, w, panel = open_tab(make_widget, tz)
    assert [panel.axis.itemText(i) for i in range(panel.axis.count())] == ["t", "z"]
    assert panel.axis.currentText() == "z" and panel.axis.isEnabled()
    viewer.dims.set_current_step(0, 2)
    viewer.dims.set_current_step(1, 5)
    w.session.layers.points.add([2, 5, *centre(BLOB_A, 5)])
    settle(qtbot, w.session)
    w.commit()
    panel.from_all.setChecked(True)
    panel.whole.setChecked(False)
    panel.start.setValue(3)
    panel.stop.setValue(8)
    run_and_wait(qtbot, panel)
    labels = w.session.layers.target.data
    assert not labels[:2].any()  # other time points untouched
    assert not labels[2, :3].any() and not labels[2, 9:].any()  # outside the range
    for z in range(3, 9):
        assert iou(labels[2, z] == 1, truth(BLOB_A, z)) > 0.7, z
    assert "up: range end at z=8; down: range end at z=3" in panel.status.text()


def test_two_d_image_disables_run_with_a_message(make_widget, qtbot):
    _viewer, _w, panel = open_tab(make_widget, scene(BLOB_A)[4])
    assert not panel.run_button.isEnabled() and not panel.correct_button.isEnabled()
    assert not panel.note.isHidden() and panel.note.text() == STACK_NEEDED
    assert "prompt carry-over (this bundle has no memory graphs" in panel.method.text()
    assert not panel.run()
    assert "2-D" in panel.status.text()


def test_removing_the_target_mid_run_stops_it_cleanly(make_widget, qtbot, monkeypatch):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A))
    click(qtbot, viewer, w, 5, centre(BLOB_A, 5))
    gate = held_encoder(monkeypatch, w.model.adapter, 2)
    target = w.session.layers.target
    written = []
    panel.runner.slice_written.connect(written.append)
    panel.from_all.setChecked(True)
    assert panel.run()
    qtbot.waitUntil(lambda: len(written) >= 2, timeout=10000)
    viewer.layers.remove(target)
    gate.set()
    qtbot.waitUntil(lambda: not panel.running, timeout=10000)
    assert "Cancelled" in panel.status.text()
    assert len(set(written)) < Z and not panel.correct_button.isEnabled()
