"""The int8 candidate search and the weight formats of the quantiser (torch-free, toy graphs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from napari_sam3_onnx.models.cpu_features import cpu_features

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _linear_chain(path, rng, n_in=96, depth=3, names=None):
    """``depth`` MatMuls of width ``n_in`` with blocks' names, input ``x`` (1, 37, n_in)."""
    from onnx import TensorProto, helper, numpy_helper

    names = names or [f"/trunk/blocks.{i}/mlp/fc1/MatMul" for i in range(depth)]
    inits, nodes, x = [], [], "x"
    for i, name in enumerate(names):
        w = rng.normal(scale=n_in ** -0.5, size=(n_in, n_in)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=name))
        x = f"h{i}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 37, n_in])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 37, n_in])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _error(tmp_path, name, feed):
    ref, got = (ort.InferenceSession(str(tmp_path / f)).run(None, feed)[0]
                for f in ("fp32.onnx", name))
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def test_unsigned_full_range_weights_are_not_less_accurate_than_signed_7bit(tmp_path):
    """u8 weights keep 8 bits without overflowing AVX2's 16-bit lanes (the 7-bit signed do too).

    On any CPU (with or without VNNI) the finer unsigned grid can only help; on this project's
    AVX2 machines full-range *signed* weights saturate (printed for the record).
    """
    from napari_sam3_onnx.export.quantize import quantize_graph

    rng = np.random.default_rng(11)
    _linear_chain(tmp_path / "fp32.onnx", rng)
    feed = {"x": rng.normal(size=(1, 37, 96)).astype(np.float32) * 3.0}
    errors = {}
    for weights in ("u8", "s8-7bit", "s8"):
        info = quantize_graph(tmp_path / "fp32.onnx", tmp_path / f"{weights}.onnx",
                              weights=weights)
        assert info["weights"] == weights and info["quantized"] == 3
        errors[weights] = _error(tmp_path, f"{weights}.onnx", feed)
    q = onnx.load(tmp_path / "u8.onnx")
    zero_points = [i for i in q.graph.initializer if "zero_point" in i.name
                   and i.data_type == onnx.TensorProto.UINT8 and "w" in i.name]
    assert zero_points, "u8 weights carry uint8 zero points"
    print("toy chain relative error:", json.dumps(errors))
    assert 0 < errors["u8"] <= errors["s8-7bit"] * 1.05
    assert errors["u8"] < 0.05
    if cpu_features().vnni:  # 32-bit sums: full-range signed weights are the finest grid
        assert errors["s8"] <= errors["u8"] * 1.05
    with pytest.raises(ValueError, match="weights"):
        quantize_graph(tmp_path / "fp32.onnx", tmp_path / "x.onnx", weights="s4")


def test_int8_weights_auto_follows_the_cpu(monkeypatch):
    from napari_sam3_onnx.export import precision
    from napari_sam3_onnx.models import cpu_features as cf

    vnni = cf.parse_cpuinfo("model name: A\nflags: avx2 avx512_vnni\n")
    avx2 = cf.parse_cpuinfo("model name: B\nflags: avx2\n")
    monkeypatch.setattr(cf, "cpu_features", lambda: vnni)
    assert precision.int8_weights_for("auto") == ("s8", "auto: A: avx2 avx512_vnni")
    monkeypatch.setattr(cf, "cpu_features", lambda: avx2)
    assert precision.int8_weights_for("auto") == ("u8", "auto: B: avx2")
    assert precision.int8_weights_for("s8-7bit") == ("s8-7bit", "named")
    import argparse

    p = argparse.ArgumentParser()
    precision.add_precision_arguments(p)
    assert p.parse_args([]).int8_weights == "auto"


def _toy_bundle(folder, rng):
    """A folder with a manifest naming two encoder graphs (and one graph left alone)."""
    from napari_sam3_onnx.export.manifest import write_manifest

    folder.mkdir()
    graphs = {"image_encoder": "image_encoder.onnx", "language_encoder": "language_encoder.onnx",
              "prompt_decoder": "prompt_decoder.onnx"}
    for role, name in graphs.items():
        _linear_chain(folder / name, rng, names=[f"/{role}/blocks.{i}/attn/qkv/MatMul"
                                                for i in range(2)])
    write_manifest(folder, {"format": "nso-sam3", "graphs": graphs,
                            "files": dict.fromkeys(graphs.values())})
    return graphs


def _fake_judge(passing: set[str], seen: list):
    """A gate that passes the candidates whose converted graphs are exactly ``passing``."""
    def judge(reference, folder):
        from napari_sam3_onnx.export.manifest import read_manifest

        converted = set(read_manifest(folder)["int8"]["graphs"])
        seen.append(sorted(converted))
        ok = converted == passing
        return {"passed": ok, "checks": {"clicks": ok, "concepts": None, "propagation": None},
                "summary": {"feature_max_rel_error": 0.01}}
    return judge


def test_search_keeps_the_first_candidate_that_passes(tmp_path):
    pytest.importorskip("onnx_ir")  # the weight-only candidate's quantiser
    from napari_sam3_onnx.export.candidates import CANDIDATES, search_int8
    from napari_sam3_onnx.export.manifest import read_manifest

    rng = np.random.default_rng(5)
    _toy_bundle(tmp_path / "fp32", rng)
    (tmp_path / "mine.txt").write_text("a user's file")
    seen: list = []
    out = tmp_path / "int8"
    record = search_int8(tmp_path / "fp32", out, {}, judge=_fake_judge({"language_encoder"}, seen),
                         log=lambda m: None)
    assert [c.name for c in CANDIDATES] == ["all", "weights", "half", "text"]
    assert seen == [["image_encoder", "language_encoder"]] * 3 + [["language_encoder"]]
    assert record["chosen"] == "text" and [t["passed"] for t in record["tried"]] == [
        False, False, False, True]
    manifest = read_manifest(out)
    assert manifest["int8_search"]["chosen"] == "text"
    assert manifest["decision_gate"]["passed"] is True
    assert manifest["precision"] == ("int8: language encoder int8 weights (fp32 arithmetic); "
                                     "the rest fp32")
    # the image encoder is fp32's own file; nothing but the output appeared beside the inputs
    assert (out / "image_encoder.onnx").read_bytes() == (
        tmp_path / "fp32" / "image_encoder.onnx").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fp32", "int8", "mine.txt"]
    # the kept candidate converted its language encoder
    ops = {n.op_type for n in onnx.load(out / "language_encoder.onnx").graph.node}
    assert "MatMulNBits" in ops


def test_search_writes_nothing_when_no_candidate_passes_unless_kept(tmp_path):
    pytest.importorskip("onnx_ir")
    from napari_sam3_onnx.export.candidates import search_int8
    from napari_sam3_onnx.export.manifest import read_manifest

    _toy_bundle(tmp_path / "fp32", np.random.default_rng(6))
    seen: list = []
    record = search_int8(tmp_path / "fp32", tmp_path / "none", {},
                         judge=_fake_judge(set(), seen), log=lambda m: None)
    assert record["chosen"] is None and len(record["tried"]) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fp32"]
    kept = tmp_path / "new" / "kept"  # a parent that does not exist yet
    record = search_int8(tmp_path / "fp32", kept, {}, judge=_fake_judge(set(), []),
                         keep_failed=True, log=lambda m: None)
    manifest = read_manifest(kept)
    assert manifest["decision_gate"]["passed"] is False
    assert manifest["int8_search"]["tried"][0]["candidate"] == "all"
    assert set(manifest["int8"]["graphs"]) == {"image_encoder", "language_encoder"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fp32", "new"]
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["kept"]


def test_search_refuses_a_folder_that_is_not_empty(tmp_path):
    from napari_sam3_onnx.export.candidates import search_int8

    _toy_bundle(tmp_path / "fp32", np.random.default_rng(7))
    out = tmp_path / "int8"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty"):
        search_int8(tmp_path / "fp32", out, {}, judge=_fake_judge(set(), []), log=lambda m: None)
    assert (out / "notes.txt").read_text() == "keep me"


def test_image_weights_candidate_stores_int8_blocks(tmp_path):
    pytest.importorskip("onnx_ir")
    from napari_sam3_onnx.export.precision import to_int8

    _toy_bundle(tmp_path / "fp32", np.random.default_rng(8))
    manifest = to_int8(tmp_path / "fp32", tmp_path / "wo", ["image_encoder", "language_encoder"],
                       method={"image_encoder": "weight-only", "language_encoder": "dynamic"})
    ops = {n.op_type for n in onnx.load(tmp_path / "wo" / "image_encoder.onnx").graph.node}
    assert "MatMulNBits" in ops and "MatMul" not in ops
    assert manifest["int8"]["method"] == {"image_encoder": "weight-only",
                                          "language_encoder": "dynamic"}
    assert manifest["precision"].startswith("int8: image encoder int8 weights (fp32")
    rng = np.random.default_rng(9)
    feed = {"x": rng.normal(size=(1, 37, 96)).astype(np.float32)}
    ref, got = (ort.InferenceSession(str(f / "image_encoder.onnx")).run(None, feed)[0]
                for f in (tmp_path / "fp32", tmp_path / "wo"))
    assert 0 < np.linalg.norm(got - ref) / np.linalg.norm(ref) < 0.02


def test_half_candidate_stores_the_image_encoder_fp16(tmp_path):
    from napari_sam3_onnx.export.precision import to_int8

    _toy_bundle(tmp_path / "fp32", np.random.default_rng(10))
    manifest = to_int8(tmp_path / "fp32", tmp_path / "half", ["image_encoder"],
                       method={"image_encoder": "fp16-storage"})
    model = onnx.load(tmp_path / "half" / "image_encoder.onnx")
    assert {i.data_type for i in model.graph.initializer} == {onnx.TensorProto.FLOAT16}
    assert manifest["int8"]["graphs"]["image_encoder"] == {"method": "fp16-storage"}
    feed = {"x": np.random.default_rng(2).normal(size=(1, 37, 96)).astype(np.float32)}
    ref, got = (ort.InferenceSession(str(f / "image_encoder.onnx")).run(None, feed)[0]
                for f in (tmp_path / "fp32", tmp_path / "half"))
    assert 0 < np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-3


def test_precision_command_refuses_a_custom_option_in_search_mode(tmp_path):
    import argparse

    from napari_sam3_onnx.export import precision

    p = argparse.ArgumentParser()
    precision.add_precision_arguments(p)
    for extra in (["--graphs", "image_encoder"], ["--int8-method", "weight-only"],
                  ["--skip-gate"]):
        args = p.parse_args(["--precision", "int8", "--int8-candidates", "search", *extra])
        with pytest.raises(SystemExit, match="custom"):
            precision.run_precision(args, tmp_path / "fp32", tmp_path / "out")
        with pytest.raises(SystemExit):  # the command line refuses before it reads anything
            precision.main([str(tmp_path / "fp32"), str(tmp_path / "out"), "--precision", "int8",
                            "--int8-candidates", "search", *extra])
    assert not (tmp_path / "out").exists()


def test_a_per_workflow_bundle_refuses_graphs_it_cannot_route_and_an_ungated_run(tmp_path):
    """The default int8 mode routes the image encoder and memory attention by the gate's
    verdicts: a language encoder to convert, or no gate, is refused before any work."""
    import argparse

    from napari_sam3_onnx.export import precision

    p = argparse.ArgumentParser()
    precision.add_precision_arguments(p)
    for extra, words in ((["--graphs", "image_encoder,language_encoder"], "language_encoder"),
                         (["--skip-gate"], "verdicts")):
        args = p.parse_args(["--precision", "int8", *extra])
        assert args.int8_candidates == "per-workflow"
        with pytest.raises(SystemExit, match=words):
            precision.run_precision(args, tmp_path / "fp32", tmp_path / "out")
        with pytest.raises(SystemExit):
            precision.main([str(tmp_path / "fp32"), str(tmp_path / "out"), "--precision", "int8",
                            *extra])
    assert not (tmp_path / "out").exists()


def test_search_converts_each_graph_and_method_once(tmp_path, monkeypatch):
    """weights, half and text all ask for the language encoder weight-only: one conversion."""
    pytest.importorskip("onnx_ir")
    from napari_sam3_onnx.export import quantize
    from napari_sam3_onnx.export.candidates import search_int8
    from napari_sam3_onnx.export.manifest import read_manifest

    calls: list = []
    real = quantize.quantize_graph

    def counting(src, dst, **kw):
        calls.append((src.name, kw["method"]))
        return real(src, dst, **kw)

    monkeypatch.setattr(quantize, "quantize_graph", counting)
    _toy_bundle(tmp_path / "fp32", np.random.default_rng(12))
    out = tmp_path / "int8"
    record = search_int8(tmp_path / "fp32", out, {}, judge=_fake_judge({"language_encoder"}, []),
                         log=lambda m: None)
    assert record["chosen"] == "text"
    assert sorted(calls) == sorted([("image_encoder.onnx", "dynamic"),
                                    ("language_encoder.onnx", "dynamic"),
                                    ("image_encoder.onnx", "weight-only"),
                                    ("language_encoder.onnx", "weight-only")])
    # the reused file is the conversion's, and the manifest records it like a fresh one
    manifest = read_manifest(out)
    assert manifest["int8"]["graphs"]["language_encoder"]["method"] == "weight-only"
    assert "MatMulNBits" in {n.op_type for n in
                             onnx.load(out / "language_encoder.onnx").graph.node}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fp32", "int8"]  # no store left
