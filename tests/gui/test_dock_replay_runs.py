"""Automatic and Propagate commits made in the dock, saved, replay from the file exactly.

The tabs are driven as a user drives them (the dock opened the napari way, the toy bundle,
clicks as real mouse events); "Save labels" records the commits; ``napari-sam3-onnx replay``
with the same bundle gives the saved labels exactly, with another bundle it reports each
object's IoU. A layer no dock commit made says it has nothing to replay. The stacks are
asymmetric (rows != cols) and their objects drift differently through z.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tifffile

pytest.importorskip("onnx")

from conftest import blob_image
from napari_sam3_onnx._napari import commit_log
from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.api.io import read_image
from napari_sam3_onnx.api.provenance import read_provenance
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

from .conftest import open_plugin_widget
from .gui_helpers import Mouse, settle

pytestmark = pytest.mark.gui

Z, SHAPE = 5, (96, 130)
WINDOW = (0.0, 255.0)


def drifting(z):
    """Three blobs moving differently through z: ``(row, col, radius)``."""
    return ((25 + 3 * z, 30 + 4 * z, 9), (70 - 2 * z, 100 - 3 * z, 8), (30, 105 - 2 * z, 7))


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return resolve_bundle("toy", tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """Another bundle of the same layout (a steeper decoder): other masks."""
    return build_sloped_tracker(tmp_path_factory.mktemp("steep"), TestGeometry(grid=24))


def open_dock(make_napari_viewer, toy, tmp_path):
    """The dock on a (5, 96, 130) stack read from a file; the image path for replay."""
    data = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(Z)])
    path = tmp_path / "blobs.tif"
    tifffile.imwrite(path, data)
    viewer = make_napari_viewer()
    viewer.add_image(data, contrast_limits=WINDOW)
    _dock, w = open_plugin_widget(viewer)  # as napari opens it
    w.load_bundle(toy, toy=True)
    return viewer, w, path


def save(viewer, w, layer, monkeypatch, path):
    """Press "Save labels" for ``layer`` with ``path`` chosen in the dialog; the message."""
    viewer.layers.selection.active = layer
    monkeypatch.setattr("napari_sam3_onnx._napari.save_labels.QFileDialog.getSaveFileName",
                        lambda *a, **k: (str(path), ""))
    said = []
    monkeypatch.setattr(w.save_labels, "notify", said.append)
    w.save_labels.click()
    assert path.exists(), said
    np.testing.assert_array_equal(np.asarray(read_image(path)), np.asarray(layer.data))
    return said[-1]


def replay(capsys, saved, image, bundle, out):
    """``napari-sam3-onnx replay``: (exit code, what it printed, the new labels or None)."""
    capsys.readouterr()
    code = main(["replay", str(saved), "--image", str(image), "--bundle", str(bundle),
                 "--out", str(out)])
    said = capsys.readouterr()
    return code, said.out + said.err, np.asarray(read_image(out)) if out.exists() else None


def clicker(viewer, w, qtbot):
    """``click(z, (row, col))``: a real mouse click on slice ``z``, then the preview settles."""
    viewer.reset_view()
    mouse = Mouse(viewer, qtbot)
    points = w.session.layers.points

    def click(z, rc):
        viewer.dims.set_current_step(0, z)
        viewer.layers.selection.active = points
        points.mode = "add"
        pos = mouse.at(*rc)
        mouse.canvas.events.mouse_press(pos=pos, modifiers=(), button=1)
        mouse.canvas.events.mouse_release(pos=pos, modifiers=(), button=1)
        settle(qtbot, w.session, timeout=20000)

    return click


def cancel_at_encode(monkeypatch, adapter, n, cancel):
    """Call ``cancel()`` while the adapter's ``n``-th encode runs (a Cancel during that slice).

    Both ways an encoder asks the adapter (``encode``, ``encode_for``) are counted, a call of
    one inside the other once.
    """
    calls, inside = [], threading.local()

    def counted(real):
        def encode(*args, **kwargs):
            outer = not getattr(inside, "on", False)
            if outer:
                calls.append(1)
                if len(calls) == n:
                    cancel()
            inside.on = True
            try:
                return real(*args, **kwargs)
            finally:
                if outer:
                    inside.on = False
        return encode

    for name in ("encode", "encode_for"):
        monkeypatch.setattr(adapter, name, counted(getattr(adapter, name)))
    return calls


def check_iou_report(text, saved_labels, new):
    """Each recorded object's best IoU with a new one, as computed here, in the report."""
    report = next(line for line in text.splitlines() if line.startswith("replay:"))
    ids = [int(i) for i in np.unique(saved_labels) if i]
    assert f"{len(ids)} recorded object(s)" in report, report
    for oid in ids:
        mine = saved_labels == oid
        best = max(((mine & (new == j)).sum() / (mine | (new == j)).sum()
                    for j in np.unique(new[mine]) if j), default=0.0)
        assert f"{oid}: {best:.3f}" in report, (oid, report)


def test_automatic_commits_on_a_slice_the_stack_and_tracked_replay_exactly(
        make_napari_viewer, toy, other, qtbot, tmp_path, monkeypatch, capsys):
    from napari_sam3_onnx._napari.automatic.output import RESULT

    viewer, w, image_path = open_dock(make_napari_viewer, toy, tmp_path)
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(12)
    viewer.dims.set_current_step(0, 3)

    def run_and_commit(target_name=None):
        panel.run()
        qtbot.waitUntil(lambda: not panel.running, timeout=60000)
        if target_name is not None:
            panel._layers_changed()
            panel.target.setCurrentIndex(panel.target.findText(target_name))
        before = set(np.unique(viewer.layers[RESULT].data)) if target_name else set()
        panel.commit()
        return set(np.unique(viewer.layers[RESULT].data)) - before

    panel.scope.set_mode("current")
    assert run_and_commit()  # the slice z=3, into a new layer
    target = viewer.layers[RESULT]
    one = np.asarray(target.data).copy()
    assert one[3].any() and not one[[0, 1, 2, 4]].any()
    panel.scope.set_mode("all")
    new = run_and_commit(RESULT)  # the stack, linked, into the same layer: around z=3's ids
    assert new and min(new) > one.max()
    panel.mode.set_tracked(True)
    panel.settings.points_per_side.setValue(10)  # another generator setting is recorded too
    viewer.dims.set_current_step(0, 1)
    assert run_and_commit(RESULT)  # tracked from z=1
    entries = commit_log.live_entries(target)
    assert [(e["workflow"], e["mode"]) for e in entries] == [
        ("automatic", "linked"), ("automatic", "linked"), ("automatic", "tracked")]
    assert entries[0]["committed"] == [[3]] and len(entries[1]["committed"]) == Z
    assert entries[2]["key"] == 1 and entries[2]["settings"]["points_per_side"] == 10
    labels = np.asarray(target.data).copy()
    assert (labels[3][one[3] > 0] == one[3][one[3] > 0]).all()  # later commits went around

    saved = tmp_path / "auto.ome.tif"
    message = save(viewer, w, target, monkeypatch, saved)
    assert "No replayable" not in message
    record = read_provenance(saved)
    assert record.workflow == "dock" and len(record.prompts["commits"]) == 3

    code, text, got = replay(capsys, saved, image_path, toy, tmp_path / "again.npy")
    assert code == 0, text
    assert "identical" in text
    np.testing.assert_array_equal(got, labels)

    code, text, got = replay(capsys, saved, image_path, other, tmp_path / "other.tif")
    assert code == 0, text
    assert got is not None and not np.array_equal(got, labels)
    check_iou_report(text, labels, got)


def test_propagated_preview_and_label_ids_replay_exactly(make_napari_viewer, toy, other,
                                                           qtbot, tmp_path, monkeypatch,
                                                           capsys):
    viewer, w, image_path = open_dock(make_napari_viewer, toy, tmp_path)
    click = clicker(viewer, w, qtbot)
    # object A committed with clicks on z=1, then carried as "label ids"
    click(1, drifting(1)[0][:2])
    assert w.commit() == [1]
    target = w.session.layers.target
    panel = w.panels["Propagate"]
    w.tabs.setCurrentWidget(panel)
    viewer.dims.set_current_step(0, 1)
    panel.from_ids.setChecked(True)
    panel.ids.setText("1")
    panel.direction.setCurrentIndex(1)  # up only
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert (target.data[1:] == 1).any(axis=(1, 2)).all() and not (target.data[0] == 1).any()
    # object B previewed with two clicks on z=3 (the second fed back), carried both ways
    r, c, _ = drifting(3)[1]
    click(3, (r, c))
    click(3, (r - 3, c + 2))
    viewer.dims.set_current_step(0, 3)
    panel.from_preview.setChecked(True)
    panel.direction.setCurrentIndex(0)  # both
    panel.whole.setChecked(False)
    panel.start.setValue(1)
    panel.stop.setValue(4)
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    labels = np.asarray(target.data).copy()
    assert set(np.unique(labels)) == {0, 1, 2}
    assert (labels[1:5] == 2).any(axis=(1, 2)).all() and not (labels[0] == 2).any()

    entries = commit_log.live_entries(target)
    assert [e["workflow"] for e in entries] == ["clicks", "propagate", "propagate"]
    assert "mask" in entries[1]["seeds"]["1"][0]  # a label's mask, as run lengths
    chain = entries[2]["prompts"]["2:3"]
    assert chain["chain"] == [1, 2] and chain["feedback"]  # the preview's refinement
    assert entries[2]["settings"]["range"] == [1, 5] and entries[2]["complete"]

    saved = tmp_path / "carried.npy"
    save(viewer, w, target, monkeypatch, saved)
    code, text, got = replay(capsys, saved, image_path, toy, tmp_path / "again.ome.zarr")
    assert code == 0, text
    assert "identical" in text
    np.testing.assert_array_equal(got, labels)

    code, text, got = replay(capsys, saved, image_path, other, tmp_path / "other.npy")
    assert code == 0, text
    assert got is not None and not np.array_equal(got, labels)
    check_iou_report(text, labels, got)


def test_a_painted_layer_says_it_has_nothing_to_replay(make_napari_viewer, toy, qtbot,
                                                       tmp_path, monkeypatch, capsys):
    viewer, w, image_path = open_dock(make_napari_viewer, toy, tmp_path)
    painted = np.zeros((Z, *SHAPE), np.int32)
    painted[2, 10:30, 40:75] = 4
    layer = viewer.add_labels(painted.copy(), name="painted")
    saved = tmp_path / "painted.ome.tif"
    message = save(viewer, w, layer, monkeypatch, saved)
    assert "No replayable steps" in message, message
    record = read_provenance(saved)
    assert record.workflow == "dock" and record.prompts["commits"] == []
    assert record.settings["replayable"] is False

    out = tmp_path / "again.tif"
    code, text, got = replay(capsys, saved, image_path, toy, out)
    assert code != 0 and got is None
    assert "cannot be replayed" in text and "no replayable step" in text, text
    assert "identical" not in text and "Traceback" not in text
    # a commit into the painted layer: the record holds it, and says what it cannot replay
    w.target.setCurrentIndex(w.target.findText("painted"))
    clicker(viewer, w, qtbot)(2, drifting(2)[1][:2])
    assert w.commit() == [5]
    assert w.session.layers.target is layer
    mixed = tmp_path / "mixed.npy"
    message = save(viewer, w, layer, monkeypatch, mixed)
    held = int(np.count_nonzero(painted))
    assert f"held {held} labelled pixel(s) before its first dock commit" in message, message
    record = read_provenance(mixed)
    assert record.settings["held_before_commits"] == held
    assert [c["workflow"] for c in record.prompts["commits"]] == ["clicks"]
    code, text, got = replay(capsys, mixed, image_path, toy, tmp_path / "mixed_again.npy")
    assert code == 1 and got is not None  # the commit alone: not the saved labels
    # the object on the same pixels, under the id an empty layer gives it, and said so
    np.testing.assert_array_equal(got, (np.asarray(layer.data) == 5).astype(got.dtype))
    assert "note: the Clicks commit on plane [2] gave ids [1], the recorded one [5]" in text
    assert f"note: the layer held {held} labelled pixel(s)" in text, text
    assert "did not reproduce" in text and "identical" not in text


def test_a_cancelled_run_and_its_correction_replay_exactly(make_napari_viewer, toy, qtbot,
                                                            tmp_path, monkeypatch, capsys):
    viewer, w, image_path = open_dock(make_napari_viewer, toy, tmp_path)
    click = clicker(viewer, w, qtbot)
    click(0, drifting(0)[0][:2])
    assert w.commit() == [1]
    target = w.session.layers.target
    panel = w.panels["Propagate"]
    w.tabs.setCurrentWidget(panel)
    viewer.dims.set_current_step(0, 0)
    # Cancel while slice 2 is encoded (the cancel token, as the button sets it): slice 2
    # completes, slice 3 is never begun
    written: list[int] = []
    panel.runner.slice_written.connect(written.append)
    panel.from_ids.setChecked(True)
    panel.ids.setText("1")
    panel.direction.setCurrentIndex(1)  # up only
    with pytest.MonkeyPatch.context() as mp:  # encodes as usual after the run
        calls = cancel_at_encode(mp, w.model.adapter, 2, panel.runner.job.gate.stop)
        assert panel.run()
        qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    assert len(calls) == 2 and "Cancel" in panel.status.text(), panel.status.text()
    assert sorted(set(written)) == [0, 1, 2]
    assert Z - 1 not in written and not np.asarray(target.data)[Z - 1].any()
    entry = commit_log.live_entries(target)[-1]
    assert entry["workflow"] == "propagate" and not entry["complete"]
    assert entry["steps"] == len(written)
    reached = sorted(set(written))
    cut = tmp_path / "cancelled.npy"  # replay stops where the run was cancelled
    save(viewer, w, target, monkeypatch, cut)
    code, text, got = replay(capsys, cut, image_path, toy, tmp_path / "cut.tif")
    assert code == 0 and "identical" in text, text
    np.testing.assert_array_equal(got, np.asarray(target.data))

    # a correction on slice 2 (previewed, not committed): object 1 recomputed from two seeds
    r, c, _ = drifting(2)[0]
    click(2, (r + 2, c - 1))
    viewer.dims.set_current_step(0, 2)
    assert panel.repropagate()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    labels = np.asarray(target.data).copy()
    assert (labels[3:] == 1).any(axis=(1, 2)).all()  # now the run went on to the end
    entries = commit_log.live_entries(target)
    assert [e["workflow"] for e in entries] == ["clicks", "propagate", "propagate"]
    fix = entries[-1]
    assert fix["complete"] and fix["settings"]["replace"] == [1]
    assert fix["previous"] == {"1": reached} and "1:2" in fix["prompts"]
    assert [s["plane"] for s in fix["seeds"]["1"]] == [0, 2]

    saved = tmp_path / "corrected.ome.zarr"
    save(viewer, w, target, monkeypatch, saved)
    code, text, got = replay(capsys, saved, image_path, toy, tmp_path / "again.tif")
    assert code == 0, text
    assert "identical" in text
    np.testing.assert_array_equal(got, labels)

