"""The convert offer: a bundle whose int8 format does not suit this CPU, converted for it.

CPU flags are simulated through the ``cpu_features`` seam; the bundles are the suite's toy
``nso-sam3`` graphs made per-workflow (as the exporter writes them, see
test_workflow_precision.py). The user's bundle is only ever read.
"""

from __future__ import annotations

import pytest

from napari_sam3_onnx.export import convert as conv
from napari_sam3_onnx.export.manifest import read_manifest, sha256
from napari_sam3_onnx.models import cpu_features as cf
from test_cpu_path import AVX2_CPU, VNNI_CPU
from test_workflow_precision import VERDICTS, _fp32, _per_workflow

pytest.importorskip("onnx")


def _gated(tmp_path, weights="s8"):
    """A per-workflow toy bundle with ``weights`` int8 weights and recorded verdicts."""
    from napari_sam3_onnx.export.manifest import write_manifest

    _, out = _per_workflow(tmp_path)
    manifest = read_manifest(out)
    manifest["decision_gate"] = {"workflows": VERDICTS}
    manifest["int8"]["weights"] = weights
    write_manifest(out, manifest, rehash=False)
    return out


def _snapshot(folder):
    return {p.name: sha256(p) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(("cpu", "weights", "offered"), [
    (AVX2_CPU, "s8", True),   # full-range s8 saturates without VNNI
    (VNNI_CPU, "u8", True),   # u8 is slower than s8 with VNNI
    (VNNI_CPU, "s8", False),
    (AVX2_CPU, "u8", False),
])
def test_the_offer_is_made_where_the_format_does_not_suit_the_cpu(tmp_path, cpu, weights,
                                                                  offered):
    bundle = _gated(tmp_path, weights)
    features = cf.parse_cpuinfo(cpu)
    offer = cf.convert_offer(bundle, features, tmp_path / "data")
    assert bool(offer) == offered
    if offered:
        fmt = "s8" if features.vnni else "u8"
        assert offer.startswith(f"napari-sam3-onnx convert {bundle} --int8-weights auto --out "
                                f"{tmp_path / 'data' / 'converted' / f'mixed-int8-{fmt}'}")


def test_an_int8_only_bundle_gets_no_convert_offer(tmp_path):
    folder = tmp_path / "int8-only"
    folder.mkdir()
    (folder / "manifest.json").write_text(
        '{"layout": "nso-sam3", "precision": "int8", "int8": {"weights": "s8"}}')
    assert cf.int8_format_warning("s8", cf.parse_cpuinfo(AVX2_CPU))  # slow or inexact: yes
    assert cf.convert_offer(folder, cf.parse_cpuinfo(AVX2_CPU), tmp_path) == ""


def test_doctor_and_the_model_line_offer_the_conversion(tmp_path, capsys, monkeypatch):
    from napari_sam3_onnx._napari.model import bundle_words
    from napari_sam3_onnx.cli import main

    root = tmp_path / "models"
    root.mkdir()
    bundle = _gated(root, "s8")
    avx2 = cf.parse_cpuinfo(AVX2_CPU)
    monkeypatch.setattr(cf, "cpu_features", lambda cpuinfo=None: avx2)
    monkeypatch.setattr(bundle_words, "cpu_features", lambda cpuinfo=None: avx2)
    assert main(["doctor", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "int8 on this CPU: this bundle's int8 weights are full-range s8" in out
    assert f"convert: napari-sam3-onnx convert {bundle} --int8-weights auto" in out
    notes = bundle_words.cpu_path_notes(bundle, "cpu")
    assert "Convert it for this CPU: <tt>napari-sam3-onnx convert" in notes


def test_convert_reusing_the_verdicts_writes_the_cpus_format_and_leaves_the_bundle(tmp_path):
    bundle = _gated(tmp_path, "s8")
    before = _snapshot(bundle)
    out = tmp_path / "data" / "converted" / "mixed-int8-u8"
    assert conv.main([str(bundle), str(out), "--int8-weights", "u8", "--verdicts", "reuse"]) == 0
    assert _snapshot(bundle) == before  # the user's bundle: not a byte changed
    manifest = read_manifest(out)
    assert manifest["int8"]["weights"] == "u8"
    assert {k: r["precision"] for k, r in manifest["workflow_precision"].items()} == {
        k: "int8" if v else "fp32" for k, v in VERDICTS.items()}
    assert manifest["decision_gate"]["reused"] is True
    assert "s8 weights" in manifest["converted_from"]["verdicts"]
    for name in ("image_encoder.onnx", "memory_attention.onnx", "prompt_decoder.onnx"):
        assert sha256(out / name) == before[name]  # fp32 graphs: the bundle's own bytes
    assert not (out.parent / "mixed-int8-u8.partial").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["mixed-int8-u8"]


def test_convert_with_the_gate_judges_the_new_graphs(tmp_path, capsys):
    bundle = _fp32(tmp_path / "fp32")
    before = _snapshot(bundle)
    out = tmp_path / "converted"
    # the toy graphs have no linear layers to quantise: every decision stays, every workflow
    # passes the gate (run for real here, through the engine) and is granted int8
    assert conv.main([str(bundle), str(out), "--int8-weights", "s8"]) == 0
    assert _snapshot(bundle) == before
    manifest = read_manifest(out)
    assert manifest["decision_gate"]["workflows"] == dict.fromkeys(VERDICTS, True)
    assert {r["precision"] for r in manifest["workflow_precision"].values()} == {"int8"}
    assert manifest["converted_from"]["verdicts"] == "gated"
    assert manifest["int8"]["weights"] == "s8"
    assert not (tmp_path / "converted.partial").exists()


@pytest.mark.parametrize("where", ["inside", "same"])
def test_an_output_inside_the_bundle_is_refused(tmp_path, where):
    bundle = _gated(tmp_path)
    before = _snapshot(bundle)
    out = bundle / "converted" if where == "inside" else bundle
    assert conv.main([str(bundle), str(out), "--verdicts", "reuse"]) == 2
    assert _snapshot(bundle) == before


def test_reuse_without_recorded_verdicts_and_an_int8_only_source_are_refused(tmp_path, capsys):
    bundle = _fp32(tmp_path / "fp32")
    assert conv.main([str(bundle), str(tmp_path / "o1"), "--verdicts", "reuse"]) == 2
    assert "no per-workflow gate verdicts" in capsys.readouterr().out
    manifest = read_manifest(bundle)
    manifest["precision"] = "int8: image encoder int8; the rest fp32"
    (bundle / "manifest.json").write_text(__import__("json").dumps(manifest))
    assert conv.main([str(bundle), str(tmp_path / "o2")]) == 2
    assert "holds no fp32 graphs" in capsys.readouterr().out
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_the_cli_command_runs_the_conversion(tmp_path, capsys):
    from napari_sam3_onnx.cli import main

    bundle = _gated(tmp_path, "s8")
    out = tmp_path / "cli-out"
    assert main(["convert", str(bundle), "--out", str(out), "--int8-weights", "u8",
                 "--verdicts", "reuse"]) == 0
    assert read_manifest(out)["int8"]["weights"] == "u8"
    assert main(["convert", str(bundle), "--out", str(bundle / "x")]) == 2
    assert not (bundle / "x").exists()
