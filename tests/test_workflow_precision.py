"""One bundle, precision per workflow: the exporter's composer and the plugin's routing.

On the suite's toy ``nso-sam3`` graphs: ``export.workflow_bundle.compose`` keeps the int8
graphs for the workflows the verdicts pass beside the fp32 ones; the plugin then runs each
workflow through the encoder the manifest grants it, caches the two precisions' embeddings under
distinct keys, and says which workflow runs at which precision.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx.api.clicks import segment_object
from napari_sam3_onnx.api.search import iter_search
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.export.manifest import read_manifest, sha256, write_manifest
from napari_sam3_onnx.export.variants import to_int8
from napari_sam3_onnx.export.workflow_bundle import compose
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import BundleFileError
from napari_sam3_onnx.models.workflow_precision import read_plan
from napari_sam3_onnx.testing.nso import FILES, build_nso
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer

SHAPE = (70, 110)  # asymmetric
BLOBS = ((20, 30, 8), (45, 80, 9))
#: The exporter's role names (the toy's manifest uses the adapter's).
EXPORT_ROLES = {"encoder": "image_encoder", "language": "language_encoder",
                "detector": "concept_detector", "decoder": "prompt_decoder",
                "memory_encoder": "memory_encoder", "memory_attention": "memory_attention"}
VERDICTS = {"clicks": True, "text": False, "exemplars": False, "propagation": True,
            "automatic": None}


def _fp32(folder: Path) -> Path:
    """A toy bundle whose manifest lists its files as the exporter writes them."""
    build_nso(folder)
    tokenizer = write_toy_tokenizer(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["graphs"] = {EXPORT_ROLES[k]: v for k, v in FILES.items()}
    manifest["files"] = {n: {} for n in [*FILES.values(), "constants.npz", tokenizer.name]}
    write_manifest(folder, manifest)
    return folder


def _tokenizer(folder: Path) -> list[str]:
    return [n for n in read_manifest(folder)["files"] if not n.endswith((".onnx", ".npz"))]


def _per_workflow(tmp_path: Path, verdicts: dict = VERDICTS) -> tuple[Path, Path]:
    fp32 = _fp32(tmp_path / "fp32")
    out = tmp_path / "mixed"
    converted = ["image_encoder", "memory_attention"]
    to_int8(fp32, out, converted, weights="s8")
    compose(fp32, out, verdicts, converted)
    return fp32, out


def test_compose_keeps_int8_for_the_passing_workflows_beside_fp32(tmp_path):
    fp32, out = _per_workflow(tmp_path)
    manifest = read_manifest(out)
    routes = manifest["workflow_precision"]
    assert {k: r["precision"] for k, r in routes.items()} == {
        "clicks": "int8", "text": "fp32", "exemplars": "fp32", "propagation": "int8",
        "automatic": "fp32"}  # not run is not a pass
    assert routes["clicks"]["graphs"] == {"image_encoder": "image_encoder.int8.onnx"}
    assert routes["text"]["graphs"] == {"image_encoder": "image_encoder.onnx"}
    assert routes["propagation"]["graphs"] == {"image_encoder": "image_encoder.int8.onnx",
                                               "memory_attention": "memory_attention.int8.onnx"}
    assert manifest["graphs"]["image_encoder"] == "image_encoder.onnx"
    for name in FILES.values():  # the fp32 graphs are the source's bytes
        assert sha256(out / name) == sha256(fp32 / name), name
    assert set(manifest["files"]) == {*FILES.values(), "constants.npz", *_tokenizer(fp32),
                                      "image_encoder.int8.onnx", "memory_attention.int8.onnx"}
    assert manifest["precision"] == ("per workflow: int8 (s8 weights) for clicks and boxes, "
                                     "propagation; fp32 for text, exemplars, automatic")
    assert manifest["int8"]["weights"] == "s8"


def test_an_int8_graph_no_workflow_uses_is_not_kept(tmp_path):
    verdicts = {**VERDICTS, "propagation": False}
    _, out = _per_workflow(tmp_path, verdicts)
    manifest = read_manifest(out)
    assert "memory_attention.int8.onnx" not in manifest["files"]
    assert not (out / "memory_attention.int8.onnx").exists()
    assert manifest["workflow_precision"]["propagation"]["graphs"] == {
        "image_encoder": "image_encoder.onnx", "memory_attention": "memory_attention.onnx"}


def _count_runs(adapter, monkeypatch) -> dict[str, int]:
    """Runs of each image-encoder and memory-attention file, by file name."""
    runs: dict[str, int] = {}
    sessions = [adapter.encoder, *adapter._encoders.values(), adapter.memory_attention]
    for s in sessions:
        run = s.run
        runs[s.path.name] = 0

        def counting(names, feeds, run=run, name=s.path.name):
            runs[name] += 1
            return run(names, feeds)

        monkeypatch.setattr(s, "run", counting)
    return runs


def _stack() -> np.ndarray:
    return np.stack([blob_image(SHAPE, BLOBS)] * 3)


def test_clicks_run_the_int8_encoder_text_the_fp32_one_under_distinct_keys(tmp_path,
                                                                          monkeypatch):
    _, out = _per_workflow(tmp_path)
    adapter = open_adapter(out)
    runs = _count_runs(adapter, monkeypatch)
    ws = Workspace()
    encoder = ws.attach(adapter, out)
    ref = SliceRef(_stack(), (1,), source="stack")
    segment_object(encoder, ref, Prompt.clicks(np.array([[20.0, 30.0]]), [1]))
    assert runs["image_encoder.int8.onnx"] == 1 and runs["image_encoder.onnx"] == 0
    list(iter_search(ws, [ref], ["cell"]))
    assert runs["image_encoder.int8.onnx"] == 1 and runs["image_encoder.onnx"] == 1
    assert encoder.encoder_calls == 2  # the plane paid both encodes
    clicks_key, text_key = encoder.key(ref, Capability.CLICKS), encoder.key(ref, Capability.TEXT)
    assert clicks_key != text_key and clicks_key in ws.cache and text_key in ws.cache
    assert len(ws.cache) == 2
    segment_object(encoder, ref, Prompt.clicks(np.array([[45.0, 80.0]]), [1]))
    list(iter_search(ws, [ref], ["cell"]))
    assert encoder.encoder_calls == 2  # each precision's embedding is reused
    assert encoder.key(ref, Capability.BOXES) == clicks_key  # boxes ride with clicks
    assert encoder.key(ref, Capability.EXEMPLARS) == text_key


def test_propagation_runs_its_granted_encoder_and_memory_attention(tmp_path, monkeypatch):
    from napari_sam3_onnx.api.propagate import iter_propagate
    from napari_sam3_onnx.engine.tracking.types import Seed

    _, out = _per_workflow(tmp_path)
    adapter = open_adapter(out)
    assert adapter.memory_attention.path.name == "memory_attention.int8.onnx"
    runs = _count_runs(adapter, monkeypatch)
    ws = Workspace()
    ws.attach(adapter, out)
    stack = _stack()
    refs = [SliceRef(stack, (k,), source="stack") for k in range(3)]
    gen = iter_propagate(ws, refs, {1: Seed.clicks(0, [(20, 30)])}, stop_after_absent=None)
    for _ in gen:
        pass
    assert runs["image_encoder.int8.onnx"] == 3 and runs["image_encoder.onnx"] == 0
    assert runs["memory_attention.int8.onnx"] >= 1


def test_a_bundle_without_the_record_runs_fp32_everywhere_with_one_key(tmp_path, monkeypatch):
    fp32 = _fp32(tmp_path / "fp32")
    adapter = open_adapter(fp32)
    assert adapter.plan is None and adapter.encoder_variant(Capability.CLICKS) is None
    encoder = Workspace().attach(adapter, fp32)
    ref = SliceRef(_stack(), (0,), source="stack")
    assert encoder.key(ref, Capability.CLICKS) == encoder.key(ref, Capability.TEXT) \
        == encoder.key(ref)


def test_the_default_encoder_is_the_manifests_not_the_first_file_by_name(tmp_path):
    _, out = _per_workflow(tmp_path)
    adapter = open_adapter(out)  # image_encoder.int8.onnx sorts before image_encoder.onnx
    assert adapter.encoder.path.name == "image_encoder.onnx"
    assert adapter.encoder_variant(None) is None
    assert adapter.encoder_variant(Capability.TEXT) is None
    assert adapter.encoder_variant(Capability.CLICKS) == "image_encoder.int8.onnx"
    assert adapter.encoder_variant(Capability.ENCODE) is None  # automatic: not run -> fp32


def test_a_record_naming_a_missing_file_is_refused(tmp_path):
    _, out = _per_workflow(tmp_path)
    (out / "image_encoder.int8.onnx").unlink()
    with pytest.raises(BundleFileError, match=r"image_encoder\.int8\.onnx"):
        open_adapter(out)


def test_the_plan_says_which_workflow_runs_at_which_precision(tmp_path):
    _, out = _per_workflow(tmp_path)
    plan = read_plan(out)
    assert plan is not None
    assert plan.words() == ("int8: clicks and boxes, propagation; "
                            "fp32: text, exemplars, automatic")
    note = plan.double_encode_note()
    assert "encoded once per precision" in note
    assert "clicks and boxes, propagation (int8)" in note
    assert "text, exemplars, automatic (fp32)" in note


def test_a_store_serves_every_workflow_the_default_encoder(tmp_path, monkeypatch):
    """A store holds one embedding per plane: with it every workflow runs fp32 (said in docs)."""
    _, out = _per_workflow(tmp_path)
    adapter = open_adapter(out)
    runs = _count_runs(adapter, monkeypatch)
    ws = Workspace()
    encoder = ws.attach(adapter, out, store=tmp_path / "store.zarr", write=True)
    ref = SliceRef(_stack(), (1,), source="stack")
    segment_object(encoder, ref, Prompt.clicks(np.array([[20.0, 30.0]]), [1]))
    assert runs["image_encoder.onnx"] == 1 and runs["image_encoder.int8.onnx"] == 0
    assert encoder.key(ref, Capability.CLICKS) == encoder.key(ref, Capability.TEXT)


def test_inspect_shows_which_workflow_runs_at_which_precision(tmp_path, capsys):
    from napari_sam3_onnx.cli import main

    _, out = _per_workflow(tmp_path)
    manifest = read_manifest(out)
    manifest["decision_gate"] = {"workflows": VERDICTS}
    write_manifest(out, manifest, rehash=False)
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "precision per workflow" in text
    assert "clicks and boxes  int8  image_encoder.int8.onnx (gate passed)" in text
    assert "text              fp32  image_encoder.onnx (gate failed)" in text
    assert ("propagation       int8  image_encoder.int8.onnx, memory_attention.int8.onnx "
            "(gate passed)") in text
    assert "automatic         fp32  image_encoder.onnx (not gated)" in text
    assert "encoded once per precision" in text
    assert "FAILS: use the fp32 bundle" not in text  # it runs fp32 there itself


def test_the_model_line_names_the_precisions_and_the_double_encode(tmp_path):
    from napari_sam3_onnx._napari.model.bundle_words import cpu_path_notes

    _, out = _per_workflow(tmp_path)
    manifest = read_manifest(out)
    manifest["decision_gate"] = {"workflows": VERDICTS}
    write_manifest(out, manifest, rehash=False)
    notes = cpu_path_notes(out, "cpu")
    assert "Precision per workflow" in notes
    assert "int8: clicks and boxes, propagation; fp32: text, exemplars, automatic" in notes
    assert "encoded once per precision" in notes
    assert "use the fp32 bundle" not in notes


def test_an_exemplar_search_runs_the_exemplars_grant_not_texts(tmp_path, monkeypatch):
    """Text granted int8, exemplars fp32: a plane searched with exemplar boxes runs fp32."""
    from napari_sam3_onnx.engine.concepts.search import Exemplars

    verdicts = {**VERDICTS, "text": True, "exemplars": False}
    _, out = _per_workflow(tmp_path, verdicts)
    adapter = open_adapter(out)
    runs = _count_runs(adapter, monkeypatch)
    ws = Workspace()
    ws.attach(adapter, out)
    ref = SliceRef(_stack(), (1,), source="stack")
    boxes = Exemplars(np.array([[12.0, 22.0, 28.0, 38.0]]), np.array([True]))
    list(iter_search(ws, [ref], [], exemplars={(1,): boxes}))
    assert runs["image_encoder.onnx"] == 1 and runs["image_encoder.int8.onnx"] == 0
    list(iter_search(ws, [ref], ["cell"]))
    assert runs["image_encoder.int8.onnx"] == 1
