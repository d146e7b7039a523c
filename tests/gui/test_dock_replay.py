"""A labels layer made in the dock, saved, replays from its file to the same labels.

Two objects are clicked (real mouse events) and committed, a third is committed and undone, a
text run goes into the same layer; "Save labels" (as OME-Zarr, OME-TIFF and ``.npy``) records
the commits still in the layer, and ``napari-sam3-onnx replay`` of each file with the same
bundle gives the saved labels exactly. The undone object is in neither.
"""

from __future__ import annotations

import numpy as np
import pytest
import tifffile

pytest.importorskip("onnx")

from napari_sam3_onnx._napari import commit_log
from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.api.io import read_image
from napari_sam3_onnx.api.provenance import read_provenance, sidecar
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

from .gui_helpers import Mouse, settle


def _click_and_commit(viewer, w, qtbot, mouse, z, truth, n):
    rr, cc = np.nonzero(truth[z] == n)
    viewer.layers.selection.active = w.session.layers.points
    w.session.layers.points.mode = "add"
    sr, sc = w.session.layers.image.scale[-2:]  # the sample has a pixel size: world units
    pos = mouse.at(rr.mean() * sr, cc.mean() * sc)
    mouse.canvas.events.mouse_press(pos=pos, modifiers=(), button=1)
    mouse.canvas.events.mouse_release(pos=pos, modifiers=(), button=1)
    settle(qtbot, w.session, timeout=20000)
    ids = w.commit()
    assert len(ids) == 1, w.session.messages
    return ids[0]


def test_dock_commits_saved_replay_to_the_same_labels(make_napari_viewer, qtbot, tmp_path,
                                                      monkeypatch):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "synthetic_nuclei")
    image = viewer.layers[0]
    _dock, w = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    w.model.load_toy()
    viewer.reset_view()
    z = int(viewer.dims.current_step[0])
    _, truth = synthetic_nuclei()
    mouse = Mouse(viewer, qtbot)
    first = _click_and_commit(viewer, w, qtbot, mouse, z, truth, 2)
    second = _click_and_commit(viewer, w, qtbot, mouse, z, truth, 5)
    target = w.session.layers.target
    undone = _click_and_commit(viewer, w, qtbot, mouse, z, truth, 3)
    assert [e["workflow"] for e in commit_log.live_entries(target)] == ["clicks"] * 3
    target.undo()
    assert not (target.data == undone).any()
    assert [e["ids"] for e in commit_log.live_entries(target)] == [[first], [second]]
    target.redo()  # a redone commit's entry comes back ...
    assert [e["ids"] for e in commit_log.live_entries(target)] == [[first], [second], [undone]]
    target.undo()  # ... and goes again

    panel = w.panels["Text"]
    panel._layers_changed()
    panel.target.setCurrentIndex(panel.target.findText(target.name))
    assert panel.target.currentText() == target.name
    panel.scope.set_mode("all")
    panel.concepts.setText("nucleus")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert len(set(np.unique(target.data)) - {0, first, second}) >= 6  # the run wrote there
    assert [e["workflow"] for e in commit_log.live_entries(target)] == ["clicks", "clicks",
                                                                        "text"]

    viewer.layers.selection.active = target
    saved = []
    for chosen in (tmp_path / "dock.ome.zarr", tmp_path / "dock.ome.tif", tmp_path / "dock.npy"):
        monkeypatch.setattr("napari_sam3_onnx._napari.save_labels.QFileDialog.getSaveFileName",
                            lambda *a, _chosen=chosen, **k: (str(_chosen), ""))
        w.save_labels.click()  # each format carries the record
        record = read_provenance(chosen)
        assert record.workflow == "dock" and len(record.prompts["commits"]) == 3, chosen
        np.testing.assert_array_equal(np.asarray(read_image(chosen)), np.asarray(target.data))
        saved.append(chosen)
    assert sidecar(tmp_path / "dock.npy").is_file()
    labels = np.asarray(target.data)

    path = tmp_path / "nuclei.tif"
    tifffile.imwrite(path, np.asarray(image.data))
    toy = str(resolve_bundle("toy"))
    replays = [(saved[0], tmp_path / "again.tif"), (saved[0], tmp_path / "again.npy"),
               (saved[1], tmp_path / "from_tif.ome.zarr"), (saved[2], tmp_path / "from_npy.tif")]
    for source, out in replays:
        assert main(["replay", str(source), "--image", str(path), "--bundle", toy, "--out",
                     str(out), "-q"]) == 0
        np.testing.assert_array_equal(np.asarray(read_image(out)), labels, err_msg=str(source))
        assert read_provenance(out).workflow == "dock"
    assert sidecar(tmp_path / "again.npy").is_file()
