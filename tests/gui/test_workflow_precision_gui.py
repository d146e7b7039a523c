"""The dock's model section with a per-workflow bundle: which workflow runs at which precision."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.models.base import Capability

from .gui_helpers import blob_stack

pytestmark = pytest.mark.gui


def test_the_model_line_names_each_workflows_precision_and_the_double_encode(
        make_napari_viewer, open_widget, tmp_path):
    from test_workflow_precision import _per_workflow

    _, folder = _per_workflow(tmp_path)
    stack, _truth, _centre = blob_stack()
    viewer = make_napari_viewer()
    viewer.add_image(stack, name="blobs", contrast_limits=(0, 3000))
    w = open_widget(viewer)
    w.model.load(folder)
    text = w.model.info.text()
    assert "per workflow: int8 (s8 weights) for clicks and boxes, propagation" in text
    assert "Precision per workflow" in text
    assert "int8: clicks and boxes, propagation; fp32: text, exemplars, automatic" in text
    assert "encoded once per precision" in text
    encoder = w.workspace.encoder
    ref = SliceRef(stack, (1,), window=(0, 3000), source="blobs")
    clicks = encoder.embed(ref, Capability.CLICKS)
    text_emb = encoder.embed(ref, Capability.TEXT)
    assert clicks is not text_emb and encoder.encoder_calls == 2
    assert w.model.adapter.encoder_variant(Capability.CLICKS) == "image_encoder.int8.onnx"


def test_the_bf16_device_names_each_workflows_arithmetic_and_runs_it(
        make_napari_viewer, open_widget, tmp_path, monkeypatch):
    """Choosing "OpenVINO CPU bf16" in the dock: bf16 only where the bundle's bf16 verdict
    passed, said on the model line; without a record, f32 everywhere, said too."""
    pytest.importorskip("openvino")
    from napari_sam3_onnx._napari.model import opener
    from test_bf16_per_workflow import VERDICTS, _record
    from test_workflow_precision import _fp32

    monkeypatch.setattr(opener, "openvino_devices", lambda: ["OpenVINO CPU", "OpenVINO CPU bf16"])
    plain = _fp32(tmp_path / "plain")
    folder = _fp32(tmp_path / "recorded")
    _record(folder, VERDICTS)
    stack, _truth, _centre = blob_stack()
    viewer = make_napari_viewer()
    viewer.add_image(stack, name="blobs", contrast_limits=(0, 3000))
    w = open_widget(viewer)
    w.model.load(plain)
    w.model.device.setCurrentText("OpenVINO CPU bf16")  # reloads on the new device
    assert "records no bf16 gate verdicts" in w.model.info.text()
    assert w.model.adapter.encoder_variant(Capability.TEXT) is None  # f32: no bf16 key
    w.model.load(folder)
    text = w.model.info.text()
    assert "bf16: text, propagation, automatic; f32: clicks and boxes, exemplars" in text
    assert "encoded once in each arithmetic" in text
    encoder = w.workspace.encoder
    ref = SliceRef(stack, (1,), window=(0, 3000), source="blobs")
    encoder.embed(ref, Capability.CLICKS)
    encoder.embed(ref, Capability.TEXT)
    assert encoder.encoder_calls == 2
    ran = {(k[0], k[1]): s.runs for k, s in w.model.adapter._sessions.items()}
    assert ran == {("image_encoder.onnx", False): 1, ("image_encoder.onnx", True): 1}
