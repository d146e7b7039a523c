"""The model section's words: what the model can do, its precision, the device; local devices."""

from __future__ import annotations

import pytest

from napari_sam3_onnx._napari.model import bundle_words as model_panel  # the words the panel shows
from napari_sam3_onnx.models.bundle import open_adapter


def test_remote_providers_are_not_offered(monkeypatch):
    from napari_sam3_onnx._napari.model import opener

    monkeypatch.setattr(opener, "available_providers", lambda: [
        "AzureExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(opener, "openvino_devices", lambda: [])
    assert opener.device_choices() == ["auto", "cuda", "cpu"]


def test_openvino_devices_follow_the_providers_and_name_the_model_line(monkeypatch, hf_bundle):
    from napari_sam3_onnx._napari.model import opener
    from napari_sam3_onnx.models.runtime import device_label

    monkeypatch.setattr(opener, "available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(opener, "openvino_devices",
                        lambda: ["OpenVINO CPU", "OpenVINO CPU bf16"])
    assert opener.device_choices() == ["auto", "cpu", "OpenVINO CPU", "OpenVINO CPU bf16"]
    adapter = open_adapter(hf_bundle)
    line = model_panel.model_line(adapter, "fp32", [device_label("OpenVINO CPU bf16")])
    assert line.endswith("clicks, boxes · fp32 · OpenVINO CPU bf16")


def test_model_line_names_family_capabilities_precision_and_device(hf_bundle):
    adapter = open_adapter(hf_bundle)
    line = model_panel.model_line(adapter, "fp16", ["CUDAExecutionProvider",
                                                    "CPUExecutionProvider"])
    assert line == "SAM 3 (hf-tracker) · clicks, boxes · fp16 · CUDA GPU"
    assert "input" not in line
    assert model_panel.model_line(adapter, None, ["CPUExecutionProvider"]).endswith(
        "clicks, boxes · CPU")


def test_the_toy_line_says_it_is_not_sam3_and_reads_its_manifest_precision(tmp_path):
    pytest.importorskip("onnx")
    from napari_sam3_onnx.api.bundle_fetch import fetch_bundle
    from napari_sam3_onnx.models.registry import get_bundle

    folder = fetch_bundle(get_bundle("toy"))
    adapter = open_adapter(folder)
    line = model_panel.model_line(adapter, model_panel.bundle_precision(folder),
                                  ["CPUExecutionProvider"], toy=True)
    assert line == ("Toy model, not SAM 3 (nso-sam3) · clicks, boxes, text, exemplars, "
                    "propagation · fp32 · CPU")
    assert model_panel.bundle_name(folder, toy=True) == "Toy model (not SAM 3)"
    assert model_panel.bundle_name(folder) == "toy"  # the registry entry it was built for
    assert model_panel.bundle_name(tmp_path / "my export") == "my export"


def test_model_line_names_a_student_image_encoder(tmp_path):
    pytest.importorskip("onnx")
    from napari_sam3_onnx.testing.hf_sam3 import build_dual

    adapter = open_adapter(build_dual(tmp_path, memory=True, student=True))
    line = model_panel.model_line(adapter, None, ["CPUExecutionProvider"])
    assert line.startswith("EfficientSAM3 student image encoder, ")
    assert line.endswith(" M parameters + SAM 3 heads (hf-sam3) · clicks, boxes, text, "
                         "propagation · CPU")
