"""The CPU path: CPU flags, the int8 format each CPU wants, the OpenVINO device names, doctor."""

from __future__ import annotations

import json

import pytest

from napari_sam3_onnx.models import cpu_features as cf
from napari_sam3_onnx.models import openvino_runtime as ovr

VNNI_CPU = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse avx2 avx512f avx512_vnni avx_vnni avx512_bf16

processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse avx2 avx512f avx512_vnni avx_vnni avx512_bf16
"""
AVX2_CPU = """processor\t: 0
model name\t: Intel(R) Xeon(R) CPU E5-2680 v4
flags\t\t: fpu sse sse2 avx avx2 fma
"""


def test_flags_are_read_from_cpuinfo_and_decide_the_int8_format(tmp_path):
    (tmp_path / "vnni").write_text(VNNI_CPU)
    (tmp_path / "avx2").write_text(AVX2_CPU)
    vnni, avx2 = cf.cpu_features(tmp_path / "vnni"), cf.cpu_features(tmp_path / "avx2")
    assert vnni.model == "AMD EPYC" and vnni.vnni and vnni.bf16
    assert not avx2.vnni and not avx2.bf16 and avx2.has("avx2")
    assert cf.best_int8_format(vnni) == "s8" and cf.best_int8_format(avx2) == "u8"
    assert vnni.summary() == "AMD EPYC: avx2 avx512f avx512_vnni avx_vnni avx512_bf16"
    amx = cf.parse_cpuinfo("model name: X\nflags: avx2 amx_int8 amx_bf16\n")
    assert amx.vnni and amx.bf16 and cf.best_int8_format(amx) == "s8"


def test_unknown_flags_degrade_to_the_format_exact_everywhere(tmp_path):
    unknown = cf.cpu_features(tmp_path / "no such file")
    assert not unknown.known and not unknown.vnni and not unknown.bf16
    assert cf.best_int8_format(unknown) == "u8"
    assert "unknown" in unknown.summary()
    assert cf.int8_format_warning("s8", unknown) == ""  # nothing claimed without knowing


def test_a_format_slow_or_inexact_on_this_cpu_is_named():
    vnni = cf.parse_cpuinfo(VNNI_CPU)
    avx2 = cf.parse_cpuinfo(AVX2_CPU)
    assert "saturate" in cf.int8_format_warning("s8", avx2)
    assert cf.int8_format_warning("u8", avx2) == cf.int8_format_warning("s8-7bit", avx2) == ""
    assert "faster" in cf.int8_format_warning("u8", vnni)
    assert cf.int8_format_warning("s8", vnni) == ""
    assert cf.int8_format_warning(None, avx2) == ""


def test_a_bundle_records_its_int8_weights_in_the_manifest(tmp_path):
    assert cf.bundle_int8_weights(tmp_path) is None
    (tmp_path / "manifest.json").write_text(json.dumps({"int8": {"weights": "s8"}}))
    assert cf.bundle_int8_weights(tmp_path) == "s8"
    (tmp_path / "manifest.json").write_text("{broken")
    assert cf.bundle_int8_weights(tmp_path) is None


@pytest.mark.parametrize(("request_", "want"), [
    ("OpenVINO CPU", "f32"), ("openvino", "f32"), ("OPENVINO_CPU", "f32"),
    ("OpenVINO CPU bf16", "bf16"), ("openvino-bf16", "bf16"), (("openvino", "cpu"), "f32"),
    ("cpu", None), ("auto", None), (("CUDAExecutionProvider",), None), ((), None)])
def test_openvino_device_names(request_, want):
    assert ovr.openvino_precision(request_) == want


def test_bf16_is_offered_only_where_the_cpu_has_it(monkeypatch, tmp_path):
    monkeypatch.setattr(ovr, "openvino_installed", lambda: True)
    monkeypatch.setattr(ovr, "cpu_features", lambda: cf.parse_cpuinfo(VNNI_CPU))
    assert ovr.openvino_devices() == ["OpenVINO CPU", "OpenVINO CPU bf16"]
    monkeypatch.setattr(ovr, "cpu_features", lambda: cf.parse_cpuinfo(AVX2_CPU))
    assert ovr.openvino_devices() == ["OpenVINO CPU"]
    monkeypatch.setattr(ovr, "openvino_installed", lambda: False)
    assert ovr.openvino_devices() == []


def test_without_openvino_the_graph_runs_on_onnxruntime_with_a_message(hf_bundle, monkeypatch):
    import builtins

    import numpy as np

    from napari_sam3_onnx.models.runtime import LazySession, RuntimeConfig

    real_import = builtins.__import__

    def no_openvino(name, *args, **kwargs):
        if name == "openvino" or name.startswith("openvino."):
            raise ImportError("No module named 'openvino'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openvino)
    sess = LazySession(hf_bundle / "vision_encoder.onnx", RuntimeConfig(providers="openvino"))
    with pytest.warns(RuntimeWarning, match=r"vision_encoder.onnx: OpenVINO CPU .*not "
                                            r"installed.*onnxruntime"):
        out = sess.run(["image_embeddings.0"],
                       {"pixel_values": np.ones((1, 3, 84, 84), np.float32)})
    assert out["image_embeddings.0"].shape[0] == 1
    assert sess.providers == ["CPUExecutionProvider"] and "not installed" in sess.fallback


def test_doctor_reports_the_cpu_and_openvino(capsys, monkeypatch, tmp_path):
    from napari_sam3_onnx.cli import main

    bundle = tmp_path / "models" / "my-int8"
    bundle.mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"int8": {"weights": "s8"}}))
    monkeypatch.setattr(cf, "cpu_features", lambda cpuinfo=None: cf.parse_cpuinfo(AVX2_CPU))
    monkeypatch.setattr(ovr, "openvino_installed", lambda: False)
    assert main(["doctor", "--root", str(tmp_path / "models")]) == 0
    out = capsys.readouterr().out
    assert "CPU:                 Intel(R) Xeon(R) CPU E5-2680 v4: avx2" in out
    assert "int8 weights for it: u8" in out
    assert "OpenVINO:            not installed" in out
    assert "int8 on this CPU: this bundle's int8 weights are full-range s8" in out


def test_bf16_embeddings_are_never_taken_for_fp32_ones(tmp_path):
    pytest.importorskip("onnx")
    from napari_sam3_onnx import api
    from napari_sam3_onnx.engine.store.lookup import open_lookup_encoder

    folder = api.open_bundle("toy", root=tmp_path).folder
    # bf16 for a store's (workflow-less) embeddings only where every workflow passed bf16
    assert api.open_bundle(folder, providers="OpenVINO CPU bf16").tag.identity == \
        api.open_bundle(folder, providers="cpu").tag.identity  # no verdicts: f32
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["openvino_bf16"] = {"graphs": {}, "workflows": dict.fromkeys(
        ("clicks", "text", "exemplars", "propagation", "automatic"), True)}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    tags = {device: api.open_bundle(folder, providers=device).tag.identity
            for device in ("cpu", "OpenVINO CPU", "OpenVINO CPU bf16")}
    assert tags["cpu"] == tags["OpenVINO CPU"]  # f32 through OpenVINO: fp32's embeddings
    assert tags["OpenVINO CPU bf16"] != tags["cpu"]
    assert tags["OpenVINO CPU bf16"]["weights"].endswith("+bf16-arithmetic")
    bf16 = api.open_bundle(folder, providers="openvino-bf16").adapter
    encoder = open_lookup_encoder(bf16, folder, tmp_path / "s.zarr", write=True)
    assert encoder.store.bundle.identity == tags["OpenVINO CPU bf16"]
