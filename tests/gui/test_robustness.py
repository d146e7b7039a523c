"""Stale results, deleted layers, transforms, dtypes, RGB, 4-D, keys and the npe2 contribution."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from napari_sam3_onnx._napari.clicks.session import DEBOUNCE_MS
from napari_sam3_onnx._napari.layers import same
from napari_sam3_onnx.api import clicks as click_flow

from .gui_helpers import blob_stack, iou, settle

pytestmark = pytest.mark.gui


def _gate_encoder(session):
    """Make the next encodes wait for ``gate.set()`` (deterministic slow encoder)."""
    gate, started = threading.Event(), threading.Event()
    adapter = session.encoder.adapter
    original = adapter.encode

    def slow(rgb):
        started.set()
        assert gate.wait(10), "test forgot to open the gate"
        return original(rgb)

    adapter.encode = slow
    return gate, started


def test_result_for_a_plane_left_meanwhile_is_not_written(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, enc = w.session.layers, w.session.encoder
    gate, started = _gate_encoder(w.session)
    viewer.dims.set_current_step(0, 2)
    lay.points.add([2, *centre(2, "A")[:2]])
    qtbot.waitUntil(started.is_set, timeout=3000)
    assert w.progress.isVisible() or not w.isVisible()  # busy while encoding
    viewer.dims.set_current_step(0, 3)  # the user moves on while the encoder runs
    qtbot.waitUntil(lambda: not w.session._debounce.active, timeout=3000)  # plane 3 handled
    gate.set()
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1
    assert not lay.preview.data.any()  # the stale mask for plane 2 was dropped
    viewer.dims.set_current_step(0, 2)  # back: the cached embedding answers at once
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1
    assert iou(lay.preview.data[2] > 0, truth(2, "A")) > 0.75


def test_deleting_the_image_mid_run_is_a_message(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, image, w = make_widget(stack)
    lay = w.session.layers
    gate, started = _gate_encoder(w.session)
    viewer.dims.set_current_step(0, 1)
    lay.points.add([1, *centre(1, "B")[:2]])
    qtbot.waitUntil(started.is_set, timeout=3000)
    viewer.layers.remove(image)
    qtbot.wait(DEBOUNCE_MS + 50)
    gate.set()
    settle(qtbot, w.session)
    assert w.session.layers is None
    assert any("was removed" in m for m in w.session.messages)
    assert not lay.preview.data.any()
    assert w.commit() == []


def test_scaled_translated_layers_put_the_mask_under_the_click(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, image, w = make_widget(stack, scale=(2.0, 0.5, 1.5), translate=(10.0, -7.0, 3.0))
    lay, k = w.session.layers, 3
    assert tuple(lay.points.scale) == (2.0, 0.5, 1.5)
    assert tuple(lay.preview.translate) == (10.0, -7.0, 3.0)
    world = image.data_to_world([k, *centre(k, "A")[:2]])
    viewer.dims.set_point(0, world[0])
    lay.points.add(lay.points.world_to_data(world))  # what a click in add mode does
    settle(qtbot, w.session)
    assert iou(lay.preview.data[k] > 0, truth(k, "A")) > 0.75
    assert not lay.preview.data[np.arange(5) != k].any()


@pytest.mark.parametrize("dtype", [np.uint16, np.float32])
def test_uint16_and_float_go_through_the_contrast_window(make_widget, qtbot, dtype):
    stack, truth, centre = blob_stack(dtype=dtype, value=1200)
    stack = stack + dtype(30000 if dtype == np.uint16 else -5.0)  # an offset background
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 0
    viewer.dims.set_current_step(0, k)
    lay.points.add([k, *centre(k, "B")[:2]])
    settle(qtbot, w.session)
    assert iou(lay.preview.data[k] > 0, truth(k, "B")) > 0.75


def test_rgb_2d_and_4d_stacks(make_widget, qtbot):
    stack, truth, centre = blob_stack(dtype=np.uint8, value=230)
    rgb = np.repeat(stack[2][..., None], 3, axis=2)
    rgb[..., 2] //= 2
    viewer, image, w = make_widget(rgb, rgb=True)
    lay = w.session.layers
    assert lay.preview.data.shape == (60, 90) and lay.points.ndim == 2
    lay.points.add(centre(2, "A")[:2])
    settle(qtbot, w.session)
    assert iou(lay.preview.data > 0, truth(2, "A")) > 0.75

    hyper = np.stack([stack, stack[::-1]])  # (t, z, rows, cols)
    viewer.layers.clear()
    image = viewer.add_image(hyper)
    w.image.setCurrentIndex(w.image.findText(image.name))
    lay = w.session.layers
    assert lay.preview.data.shape == hyper.shape
    viewer.dims.set_current_step(0, 1)
    viewer.dims.set_current_step(1, 1)  # t=1, z=1 shows plane 3 of the stack
    lay.points.add([1, 1, *centre(3, "B")[:2]])
    settle(qtbot, w.session)
    assert iou(lay.preview.data[1, 1] > 0, truth(3, "B")) > 0.75
    assert lay.preview.data.sum() == lay.preview.data[1, 1].sum()


def test_keys_3d_view_message_and_feedback_logits(make_widget, qtbot, monkeypatch):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 2
    seen = []
    real = click_flow.segment_prompt
    monkeypatch.setattr(click_flow, "segment_prompt",
                        lambda a, e, p, t: seen.append(p) or real(a, e, p, t))
    viewer.dims.set_current_step(0, k)
    keys = viewer.window._qt_viewer._key_map_handler
    viewer.layers.selection.active = lay.points
    r, c, _ = centre(k, "B")
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    keys.press_key("t")
    assert w.negative.isChecked()
    lay.points.add([k, r, c + 6])
    settle(qtbot, w.session)
    assert seen[0].mask_logits is None
    assert seen[-1].mask_logits is not None  # refinement feeds the previous low-res logits
    keys.press_key("c")
    assert lay.target.data.max() == 1 and len(lay.points.data) == 0
    viewer.dims.ndisplay = 3
    lay.points.add([k, r, c])
    settle(qtbot, w.session)
    assert "2-D view" in w.session.messages[-1]
    assert not lay.preview.data.any()


def test_plugin_contribution_and_sample(make_napari_viewer, open_widget, qtbot, hf_bundle):
    viewer = make_napari_viewer()
    viewer.open_sample("napari-sam3-onnx", "synthetic_nuclei")
    image = viewer.layers["synthetic nuclei"]
    assert image.data.dtype == np.uint16 and image.data.shape == (12, 180, 240)
    w = open_widget(viewer)
    assert same(w.session.image, image)
    assert tuple(w.session.layers.points.scale) == tuple(image.scale)
    w.load_bundle(hf_bundle, toy=True)
    assert "TOY TEST MODEL" in w.model.info.text()
