"""The Automatic tab's tracked mode in a real viewer: a key slice's objects carried through z."""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.api.automatic_tracked import segment_all_tracked
from napari_sam3_onnx.api.bundles import resolve_bundle

from .conftest import open_plugin_widget

pytestmark = pytest.mark.gui

Z, SHAPE = 5, (96, 130)
WINDOW = (0.0, 255.0)


def drifting(z):
    """Three blobs moving differently through z: ``(row, col, radius)``."""
    return ((25 + 3 * z, 30 + 4 * z, 9), (70 - 2 * z, 100 - 3 * z, 8), (30, 105 - 2 * z, 7))


def stack(nz=Z, drift=drifting):
    return np.stack([blob_image(SHAPE, drift(z), value=255) for z in range(nz)])


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return resolve_bundle("toy", tmp_path_factory.mktemp("home"))


def open_tab(make_napari_viewer, data, bundle, **kwargs):
    viewer = make_napari_viewer()
    image = viewer.add_image(data, contrast_limits=WINDOW, **kwargs)
    _dock, widget = open_plugin_widget(viewer)  # as napari opens it
    widget.load_bundle(bundle, toy=True)
    panel = widget.panels["Automatic"]
    widget.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(12)
    return viewer, image, widget, panel


def preview_stack(viewer):
    from napari_sam3_onnx._napari.automatic.output import PREVIEW

    return np.asarray(viewer.layers[PREVIEW].data)


def test_tracked_mode_gives_the_api_labels_one_id_per_object_through_z(make_napari_viewer, toy,
                                                                        qtbot):
    from napari_sam3_onnx._napari.automatic.output import PREVIEW, RESULT

    data = stack()
    viewer, _image, _w, panel = open_tab(make_napari_viewer, data, toy, scale=(3.0, 1.0, 0.5))
    assert not panel.mode.isHidden()  # a stack: the choice is offered
    panel.mode.set_tracked(True)
    assert not panel.scope.isEnabled()  # the tracked mode walks the whole stack
    assert "memory" in panel.mode.method.text().lower()
    viewer.dims.set_current_step(0, 2)  # the key slice: the one the viewer shows
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    got = preview_stack(viewer)
    ref = segment_all_tracked(api.open_bundle(toy), data, key=2,
                              settings=panel.settings.settings(), window=WINDOW)
    assert ref.propagation is not None and ref.propagation.method == "memory"
    np.testing.assert_array_equal(got, ref.labels)  # the tab runs the API's loop
    for k in range(3):  # every blob keeps one id on every slice, and the ids differ
        ids = {int(got[z][drifting(z)[k][:2]]) for z in range(Z)}
        assert len(ids) == 1 and 0 not in ids
    assert len(set(np.unique(got)) - {0}) == 3
    table = viewer.layers[PREVIEW].features
    assert len(table) == sum(len(set(np.unique(got[z])) - {0}) for z in range(Z))
    assert "carried through 5 slice(s) (SAM memory)" in panel.messages[-1]
    assert "z=2" in panel.messages[-1]
    # the same commit as the per-plane mode: one new layer, ids kept one per object
    panel.commit()
    assert PREVIEW not in viewer.layers
    out = viewer.layers[RESULT]
    np.testing.assert_array_equal(out.data, got)
    np.testing.assert_allclose(out.scale, (3.0, 1.0, 0.5))


def test_a_chosen_key_slice_and_the_carry_over_are_said(make_napari_viewer, hf_bundle, qtbot):
    data = stack()
    viewer, _image, _w, panel = open_tab(make_napari_viewer, data, hf_bundle)
    panel.mode.set_tracked(True)
    assert "carry-over" in panel.mode.method.text()  # said before the run, as Propagate does
    panel.mode.key.setValue(1)  # not the slice the viewer shows (0)
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    ref = segment_all_tracked(api.open_bundle(hf_bundle), data, key=1,
                              settings=panel.settings.settings(), window=WINDOW)
    assert ref.propagation is not None and ref.propagation.method == "carry-over"
    np.testing.assert_array_equal(preview_stack(viewer), ref.labels)
    last = panel.messages[-1]
    assert "z=1" in last and "no memory graphs" in last and "carry-over" in last, last


def test_cancel_stops_a_tracked_run_with_complete_slices(make_napari_viewer, toy, qtbot,
                                                         monkeypatch):
    data = stack(12, lambda z: ((25 + z, 30 + 2 * z, 9), (70 - z, 100 - 2 * z, 8)))
    viewer, _image, w, panel = open_tab(make_napari_viewer, data, toy)
    encoder = w.model.workspace.encoder
    embed = encoder.embed

    def slow(*args, **kwargs):  # a slice takes long enough to press Cancel between slices
        time.sleep(0.3)
        return embed(*args, **kwargs)

    monkeypatch.setattr(encoder, "embed", slow)
    panel.mode.set_tracked(True)
    viewer.dims.set_current_step(0, 6)
    panel.run()
    qtbot.waitUntil(lambda: panel.output is not None and len(panel.output.planes) >= 2,
                    timeout=60000)
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    planes = [index for index, _ in panel.output.planes]
    assert 2 <= len(planes) < 12 and len(set(planes)) == len(planes)
    assert panel.messages[-1].startswith(f"Cancelled after {len(planes)} of 12 slice(s)")
    got = preview_stack(viewer)
    ref = segment_all_tracked(api.open_bundle(toy), data, key=6,
                              settings=panel.settings.settings(), window=WINDOW)
    for (z,) in planes:  # what arrived is complete and right
        np.testing.assert_array_equal(got[z], ref.labels[z])
    assert not any(got[z].any() for z in range(12) if (z,) not in planes)
    assert panel.commit_button.isEnabled()


def test_the_mode_is_offered_only_for_an_image_with_a_slice_axis(make_napari_viewer, toy,
                                                                 qtbot):
    viewer, _image, w, panel = open_tab(make_napari_viewer,
                                        blob_image(SHAPE, drifting(0), value=255), toy)
    assert panel.mode.isHidden() and not panel.mode.tracked
    panel.mode.set_tracked(True)  # chosen earlier for a stack: a 2-D image runs per plane
    assert not panel.mode.tracked
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert "object(s) in the preview" in panel.messages[-1]
    viewer.add_image(stack(), contrast_limits=WINDOW, name="stack")
    w.image.setCurrentIndex(w.image.findText("stack"))
    assert not panel.mode.isHidden() and panel.mode.tracked
    assert panel.mode.key.maximum() == Z - 1


def test_a_4d_image_is_tracked_along_z_at_the_time_point_shown(make_napari_viewer, toy, qtbot):
    data = np.stack([stack(4, lambda z: ((40, 20 + 5 * z, 9),)), stack(4)])  # (t, z, y, x)
    viewer, _image, _w, panel = open_tab(make_napari_viewer, data, toy)
    assert "(z)" in panel.mode.key_label.text() and panel.mode.key.maximum() == 3
    panel.mode.set_tracked(True)
    viewer.dims.set_current_step(0, 1)
    viewer.dims.set_current_step(1, 2)
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    got = preview_stack(viewer)
    ref = segment_all_tracked(api.open_bundle(toy), data[1], key=2,
                              settings=panel.settings.settings(), window=WINDOW)
    np.testing.assert_array_equal(got[1], ref.labels)
    assert ref.labels.any() and not got[0].any()  # the other time point is left alone
    assert "t=1, z=2" in panel.messages[-2]  # the start message names the key slice
