"""OpenVINO bf16 chosen per workflow: the bundle's bf16 gate verdicts, used per workflow.

On the suite's toy ``nso-sam3`` graphs (asymmetric planes): with the "OpenVINO CPU bf16" device
the image encoder computes in bf16 only for the workflows whose bf16 verdict the manifest
records as passing (the other workflows, and every other graph, run OpenVINO's f32); without
a record nothing runs bf16, and the model line and ``inspect`` say so. The gate judges bf16 for
every workflow whatever is recorded, and ``--record`` writes its verdicts into the manifest.
Which graph ran at which precision is read from the sessions that ran (their configs), not
from numbers.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("openvino")

from conftest import blob_image
from napari_sam3_onnx.api.clicks import segment_object
from napari_sam3_onnx.api.search import iter_search
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.export.manifest import read_manifest, write_manifest
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.runtime import (
    LazySession,
    RuntimeConfig,
    approximate_arithmetic,
)

#: The manifest key ``gate --record`` writes (:data:`~.workflow_precision.BF16_KEY`).
BF16_KEY = "openvino_bf16"

BF16 = "OpenVINO CPU bf16"
SHAPE = (70, 110)  # asymmetric
BLOBS = ((20, 30, 8), (45, 80, 9))
#: What the reduced model's bf16 gate said (issue 28): clicks and exemplars fail.
VERDICTS = {"clicks": False, "text": True, "exemplars": False, "propagation": True,
            "automatic": True}


@pytest.fixture
def toy(tmp_path):
    from napari_sam3_onnx import api

    src = api.open_bundle("toy", root=tmp_path / "home").folder
    folder = tmp_path / "toy"
    shutil.copytree(src, folder)
    return folder


def _record(folder, verdicts):
    """Write bf16 verdicts into ``folder``'s manifest as ``gate --record`` does (by hand)."""
    manifest = read_manifest(folder)
    graphs = {n: f.get("sha256") for n, f in manifest.get("files", {}).items()
              if n.endswith(".onnx")}
    manifest[BF16_KEY] = {"device": BF16, "openvino": "test", "workflows": verdicts,
                          "summary": {}, "gates": {}, "graphs": graphs}
    write_manifest(folder, manifest, rehash=False)


@pytest.fixture
def ran(monkeypatch):
    """Every graph run as ``(file, OpenVINO precision)``, in call order."""
    calls: list[tuple[str, str | None]] = []
    real = LazySession.run

    def run(self, outputs, feeds):
        calls.append((self.path.name, self.config.openvino))
        return real(self, outputs, feeds)

    monkeypatch.setattr(LazySession, "run", run)
    return calls


def _encodes(calls) -> list[str | None]:
    return [p for name, p in calls if name == "image_encoder.onnx"]


def _stack() -> np.ndarray:
    return np.stack([blob_image(SHAPE, BLOBS)] * 3)


def _attach(folder, device=BF16):
    adapter = open_adapter(folder, RuntimeConfig(providers=device))
    ws = Workspace()
    return adapter, ws, ws.attach(adapter, folder)


def test_bf16_runs_only_for_the_workflows_whose_verdict_passed(toy, ran):
    _record(toy, VERDICTS)
    _, ws, encoder = _attach(toy)
    ref = SliceRef(_stack(), (1,), source="stack")
    segment_object(encoder, ref, Prompt.clicks(np.array([[20.0, 30.0]]), [1]))
    assert _encodes(ran) == ["f32"]  # clicks failed bf16: OpenVINO's f32
    assert {p for name, p in ran if name == "prompt_decoder.onnx"} == {"f32"}
    ran.clear()
    list(iter_search(ws, [ref], ["cell"]))
    assert _encodes(ran) == ["bf16"]  # text passed
    assert {p for name, p in ran if name != "image_encoder.onnx"} == {"f32"}  # detector, ...
    assert encoder.encoder_calls == 2  # the plane paid one encode per arithmetic
    keys = {encoder.key(ref, c) for c in (Capability.CLICKS, Capability.TEXT)}
    assert len(keys) == 2 and all(k in ws.cache for k in keys)
    assert encoder.key(ref, Capability.EXEMPLARS) == encoder.key(ref, Capability.CLICKS)


def test_propagation_computes_its_encoder_and_memory_attention_in_bf16(toy, ran):
    from napari_sam3_onnx.api.propagate import iter_propagate
    from napari_sam3_onnx.engine.tracking.types import Seed

    _record(toy, VERDICTS)
    adapter, ws, _ = _attach(toy)
    assert adapter.memory_attention.config.openvino == "bf16"
    assert adapter.memory_encoder.config.openvino == "f32"
    refs = [SliceRef(_stack(), (k,), source="stack") for k in range(3)]
    for _ in iter_propagate(ws, refs, {1: Seed.clicks(0, [(20, 30)])}, stop_after_absent=None):
        pass
    assert _encodes(ran) == ["bf16"] * 3
    assert ("memory_attention.onnx", "bf16") in ran


def test_without_a_bf16_record_every_workflow_runs_f32_and_says_so(toy, ran, capsys,
                                                                   monkeypatch):
    from napari_sam3_onnx._napari.model.bundle_words import cpu_path_notes
    from napari_sam3_onnx.cli import main
    from napari_sam3_onnx.models import openvino_runtime

    adapter, ws, encoder = _attach(toy)
    ref = SliceRef(_stack(), (0,), source="stack")
    segment_object(encoder, ref, Prompt.clicks(np.array([[20.0, 30.0]]), [1]))
    list(iter_search(ws, [ref], ["cell"]))
    assert {p for _, p in ran} == {"f32"}
    assert encoder.encoder_calls == 1  # one arithmetic: one embedding for both
    assert approximate_arithmetic(adapter) is None
    note = cpu_path_notes(toy, BF16)
    assert "records no bf16 gate verdicts" in note and "every workflow runs f32" in note
    monkeypatch.setattr(openvino_runtime, "openvino_devices", lambda: ["OpenVINO CPU"])
    assert main(["inspect", str(toy)]) == 0
    assert "OpenVINO CPU bf16" not in capsys.readouterr().out  # this CPU has no bf16
    monkeypatch.setattr(openvino_runtime, "openvino_devices",
                        lambda: ["OpenVINO CPU", "OpenVINO CPU bf16"])
    assert main(["inspect", str(toy)]) == 0
    out = capsys.readouterr().out
    assert "OpenVINO CPU bf16:" in out and "every workflow runs f32" in out


def test_the_model_line_and_inspect_name_each_workflows_arithmetic(toy, capsys):
    from napari_sam3_onnx._napari.model.bundle_words import cpu_path_notes
    from napari_sam3_onnx.cli import main

    _record(toy, VERDICTS)
    words = "bf16: text, propagation, automatic; f32: clicks and boxes, exemplars"
    note = cpu_path_notes(toy, BF16)
    assert words in note and "encoded once in each arithmetic" in note
    assert words not in cpu_path_notes(toy, "OpenVINO CPU")  # f32 device: nothing to say
    assert main(["inspect", str(toy)]) == 0
    out = capsys.readouterr().out
    assert "clicks and boxes  f32   (bf16 gate failed)" in out
    assert "text              bf16  (bf16 gate passed)" in out


def test_a_record_made_for_other_graph_files_is_not_used(tmp_path):
    from napari_sam3_onnx.models.workflow_precision import read_bf16
    from test_workflow_precision import _fp32

    folder = _fp32(tmp_path / "fp32")
    _record(folder, dict.fromkeys(VERDICTS, True))
    assert read_bf16(folder).workflow_bf16("clicks")
    manifest = read_manifest(folder)
    (folder / "image_encoder.onnx").write_bytes((folder / "image_encoder.onnx").read_bytes())
    manifest["files"]["image_encoder.onnx"]["sha256"] = "0" * 64  # a re-export in place
    write_manifest(folder, manifest, rehash=False)
    grants = read_bf16(folder)
    assert grants.verdicts is None and not grants.workflow_bf16("clicks")
    assert "other graph files" in grants.note()


def test_a_store_is_bf16_only_when_every_workflow_passed(toy, tmp_path):
    """A store serves every workflow: its embeddings are bf16 only if all of them may use it."""
    from napari_sam3_onnx import api

    tags = {}
    for name, verdicts in (("none", None), ("some", VERDICTS),
                           ("all", dict.fromkeys(VERDICTS, True))):
        folder = tmp_path / name
        shutil.copytree(toy, folder)
        if verdicts is not None:
            _record(folder, verdicts)
        bundle = api.open_bundle(folder, providers=BF16)
        tags[name] = bundle.tag.identity["weights"]
        assert bundle.adapter.encoder_variant(None) == (
            "image_encoder.onnx@bf16" if name == "all" else None)
    assert tags["all"].endswith("+bf16-arithmetic")
    assert not tags["none"].endswith("arithmetic") and not tags["some"].endswith("arithmetic")


def test_the_gate_judges_bf16_everywhere_and_records_its_verdicts(tmp_path, ran, capsys):
    """A recorded verdict never exempts a workflow from being judged again."""
    from napari_sam3_onnx.export import gate
    from test_workflow_precision import _fp32

    toy = _fp32(tmp_path / "fp32")
    _record(toy, dict.fromkeys(VERDICTS, False))
    ran.clear()
    code = gate.main([str(toy), str(toy), "--device", BF16, "--record"])
    variant = [p for name, p in ran if name == "image_encoder.onnx" and p is not None]
    assert variant and set(variant) == {"bf16"}  # every stage's encoder judged in bf16
    judged = {p for name, p in ran if name == "prompt_decoder.onnx" and p is not None}
    assert judged == {"f32"}  # as the plugin runs it
    record = read_manifest(toy)[BF16_KEY]
    assert set(record["workflows"]) == set(VERDICTS)
    assert all(isinstance(v, bool) for v in record["workflows"].values())
    assert record["device"] == BF16 and record["openvino"]
    assert code == (0 if all(record["workflows"].values()) else 1)
    assert "recorded in" in capsys.readouterr().out
    json.dumps(record)  # plain JSON


def test_record_needs_the_bf16_device(toy):
    from napari_sam3_onnx.export import gate

    with pytest.raises(SystemExit):
        gate.main([str(toy), str(toy), "--record"])
    assert BF16_KEY not in read_manifest(toy)


def test_a_variant_made_from_a_recorded_bundle_does_not_inherit_its_bf16_verdicts(tmp_path):
    from napari_sam3_onnx.export.variants import to_int8
    from napari_sam3_onnx.export.workflow_bundle import compose
    from napari_sam3_onnx.models.workflow_precision import read_bf16
    from test_workflow_precision import _fp32

    fp32 = _fp32(tmp_path / "fp32")
    _record(fp32, dict.fromkeys(VERDICTS, True))
    to_int8(fp32, tmp_path / "int8", ["image_encoder"], weights="s8")
    assert BF16_KEY not in read_manifest(tmp_path / "int8")
    assert read_bf16(tmp_path / "int8").verdicts is None
    _record(tmp_path / "int8", dict.fromkeys(VERDICTS, True))  # even one made on the variant
    compose(fp32, tmp_path / "int8", {"clicks": True}, ["image_encoder"])
    assert BF16_KEY not in read_manifest(tmp_path / "int8")  # the per-workflow bundle


def test_doctor_names_each_bundles_bf16_record_and_the_rule(toy, tmp_path, capsys, monkeypatch):
    from napari_sam3_onnx.cli import main
    from napari_sam3_onnx.models import openvino_runtime

    monkeypatch.setattr(openvino_runtime, "openvino_devices",
                        lambda: ["OpenVINO CPU", "OpenVINO CPU bf16"])
    root = tmp_path / "roots"
    root.mkdir()
    shutil.copytree(toy, root / "recorded")
    shutil.copytree(toy, root / "plain")
    _record(root / "recorded", VERDICTS)
    assert main(["doctor", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "bf16 runs only the workflows a bundle's bf16 gate verdicts pass" in out
    recorded = out.split("recorded:")[1]
    assert ("OpenVINO CPU bf16: bf16: text, propagation, automatic; f32: clicks and boxes, "
            "exemplars") in recorded
    assert out.count("OpenVINO CPU bf16: bf16:") == 1  # the plain bundle has no record


def test_a_layout_without_per_workflow_routing_runs_bf16_for_all_or_none(hf_bundle, tmp_path):
    """hf-tracker cannot pick bf16 per workflow: bf16 only if every workflow's verdict passed."""
    from napari_sam3_onnx._napari.model.bundle_words import cpu_path_notes

    sessions = {}
    for name, verdicts in (("none", None), ("some", VERDICTS),
                           ("all", dict.fromkeys(VERDICTS, True))):
        folder = tmp_path / name
        shutil.copytree(hf_bundle, folder)
        if verdicts is not None:
            (folder / "manifest.json").write_text(json.dumps({BF16_KEY: {
                "workflows": verdicts, "graphs": {}}}))
        adapter = open_adapter(folder, RuntimeConfig(providers=BF16))
        sessions[name] = {s.config.openvino for s in vars(adapter).values()
                          if isinstance(s, LazySession)}
        assert approximate_arithmetic(adapter) == ("bf16" if name == "all" else None)
    assert sessions == {"none": {"f32"}, "some": {"f32"}, "all": {"bf16"}}
    note = cpu_path_notes(tmp_path / "some", BF16, per_workflow=False)
    assert "one arithmetic for all workflows" in note and "every workflow runs f32" in note
