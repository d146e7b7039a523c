"""The gate's verdicts per workflow: judged separately, kept in the manifest, shown to the user."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from napari_sam3_onnx.export import gate


def _disc(shape, r, c, rad):
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    return (rr - r) ** 2 + (cc - c) ** 2 <= rad**2


def _decisions() -> dict:
    """Decisions as ``gate.decisions`` makes them, on asymmetric (37, 53) planes."""
    rng = np.random.default_rng(5)
    a, b = _disc((37, 53), 12, 15, 6), _disc((37, 53), 25, 40, 8)
    return {
        "features": {"f": rng.standard_normal((1, 4, 6, 9)).astype(np.float32)},
        "clicks": [{"candidate": 1, "mask": a, "logits": rng.random((1, 7, 5))}],
        "concepts": [{"scores": np.array([0.9, 0.2, 0.7], np.float32),
                      "masks": {0: (a, rng.random((5, 3))), 2: (b, rng.random((5, 3)))}},
                     {"scores": np.array([0.8, 0.1], np.float32),
                      "masks": {0: (b, rng.random((5, 3)))}}],
        "propagation": [(a, rng.random((4, 6))) for _ in range(3)],
        "automatic": [(a, 0.95), (b, 0.9)],
    }


def test_identical_decisions_pass_every_workflow():
    d = _decisions()
    result = gate.compare(d, copy.deepcopy(d))
    assert result["passed"]
    assert result["workflows"] == dict.fromkeys(gate.WORKFLOWS, True)


def test_an_exemplar_change_fails_exemplars_only():
    ref, other = _decisions(), _decisions()
    other["concepts"][1]["masks"][0] = (_disc((37, 53), 10, 10, 4), np.zeros((5, 3)))
    result = gate.compare(ref, other)
    assert not result["passed"]
    assert result["workflows"] == {"clicks": True, "text": True, "exemplars": False,
                                   "propagation": True, "automatic": True}


def test_a_text_detection_flip_fails_text_and_a_lost_automatic_mask_fails_automatic():
    ref, other = _decisions(), _decisions()
    del other["concepts"][0]["masks"][2]
    other["automatic"] = other["automatic"][:1]
    result = gate.compare(ref, other)
    assert result["workflows"]["text"] is False and result["workflows"]["automatic"] is False
    assert result["workflows"]["clicks"] and result["workflows"]["exemplars"]
    assert result["automatic"] == {"masks_fp32": 2, "masks_other": 1, "same_count": False,
                                   "min_mask_iou": 0.0}


def test_stages_not_run_have_no_verdict():
    ref, other = _decisions(), _decisions()
    partial = {k: other[k] for k in ("features", "clicks")}
    result = gate.compare(ref, partial)
    assert result["workflows"] == {"clicks": True, "text": None, "exemplars": None,
                                   "propagation": None, "automatic": None}
    assert not result["passed"]


def test_a_reference_cache_without_the_automatic_stage_is_made_again(tmp_path, monkeypatch):
    from napari_sam3_onnx.export import decision_cache
    from napari_sam3_onnx.export.manifest import read_manifest, write_manifest

    folder = tmp_path / "fp32"
    folder.mkdir()
    (folder / "image_encoder.onnx").write_bytes(b"w")
    write_manifest(folder, {"layout": "nso-sam3", "files": {"image_encoder.onnx": {}}})
    key = {n: f["sha256"] for n, f in read_manifest(folder)["files"].items()}
    old = {k: v for k, v in _decisions().items() if k != "automatic"}
    decision_cache.save(tmp_path / "ref.npz", key, old)
    calls = []
    monkeypatch.setattr(gate, "decisions", lambda f: calls.append(f) or _decisions())
    fresh = gate.cached_decisions(folder, tmp_path / "ref.npz")
    assert calls and "automatic" in fresh


def test_the_toy_bundle_runs_every_stage_of_the_gate(tmp_path):
    pytest.importorskip("onnx")
    from napari_sam3_onnx import api

    folder = api.open_bundle("toy", root=tmp_path).folder
    d = gate.decisions(folder)
    assert set(gate.STAGES) <= set(d)
    assert len(d["clicks"]) == len(gate.CLICK_PROMPTS) and len(d["propagation"]) == 8
    assert gate.compare(d, d)["workflows"] == dict.fromkeys(gate.WORKFLOWS, True)


def _gated_bundle(tmp_path, workflows):
    pytest.importorskip("onnx")
    from napari_sam3_onnx import api

    toy = api.open_bundle("toy", root=tmp_path / "home").folder
    import shutil

    folder = tmp_path / "int8"
    shutil.copytree(toy, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(precision="int8: image encoder int8; the rest fp32",
                    int8={"weights": "u8"}, decision_gate={"passed": False,
                                                           "workflows": workflows})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


VERDICTS = {"clicks": True, "text": False, "exemplars": False, "propagation": True,
            "automatic": None}


def test_inspect_shows_the_verdict_of_each_workflow(tmp_path, capsys):
    from napari_sam3_onnx.cli import main

    folder = _gated_bundle(tmp_path, VERDICTS)
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "precision:    int8: image encoder int8" in out
    assert "int8 weights: u8" in out
    assert "  clicks and boxes  passes (fp32's decisions)" in out
    assert "  text              FAILS: use the fp32 bundle" in out
    assert "  automatic         not gated: use the fp32 bundle" in out


def test_the_model_section_names_the_workflows_the_gate_failed(tmp_path):
    from napari_sam3_onnx._napari.model.bundle_words import cpu_path_notes
    from napari_sam3_onnx.models.gate_verdicts import workflow_verdicts

    folder = _gated_bundle(tmp_path, VERDICTS)
    assert workflow_verdicts(folder) == VERDICTS
    note = cpu_path_notes(folder, "cpu")
    assert ("passes clicks and boxes, propagation; fails text, exemplars; not run: automatic"
            in note)
    passing = _gated_bundle(tmp_path / "b", dict.fromkeys(VERDICTS, True))
    assert "Decision gate" not in cpu_path_notes(passing, "cpu")
    # no bf16 verdicts recorded: the bf16 device runs f32 and says so (not "not exact")
    bf16 = cpu_path_notes(passing, "OpenVINO CPU bf16")
    assert "every workflow runs f32" in bf16 and "not exact" not in bf16
    manifest = json.loads((passing / "manifest.json").read_text())
    manifest["openvino_bf16"] = {"workflows": dict.fromkeys(VERDICTS, True), "graphs": {}}
    (passing / "manifest.json").write_text(json.dumps(manifest))
    assert "not exact" in cpu_path_notes(passing, "OpenVINO CPU bf16")
