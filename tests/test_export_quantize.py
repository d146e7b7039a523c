"""int8 quantisation of the exporter's graphs: which layers stay fp32 (torch-free)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _blocks_graph(path, rng):
    """Three "blocks" of MatMul (+ a ``/resizer/`` head and a token table), names as exported."""
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes, x = [], [], "tokens_emb"
    table = rng.normal(size=(50, 48)).astype(np.float32)
    inits.append(numpy_helper.from_array(table, "table"))
    nodes.append(helper.make_node("Gather", ["table", "tokens"], [x], name="/embed/Gather"))
    names = [f"/encoder/transformer/resblocks.{i}/mlp/c_fc/MatMul" for i in range(3)]
    names.append("/resizer/MatMul")
    for i, name in enumerate(names):
        w = rng.normal(scale=48 ** -0.5, size=(48, 48)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=name))
        x = f"h{i}"
    graph = helper.make_graph(
        nodes, "blocks", [helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, 7])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 7, 48])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return names


def test_last_blocks_and_heads_stay_fp32(tmp_path):
    from napari_sam3_onnx.export.quantize import excluded_nodes, quantize_graph

    rng = np.random.default_rng(3)
    names = _blocks_graph(tmp_path / "fp32.onnx", rng)
    model = onnx.load(tmp_path / "fp32.onnx")
    assert excluded_nodes(model) == ["/resizer/MatMul"]
    assert excluded_nodes(model, last_blocks=1) == [names[2], "/resizer/MatMul"]
    assert excluded_nodes(model, last_blocks=2, exclude=()) == names[1:3]
    info = quantize_graph(tmp_path / "fp32.onnx", tmp_path / "int8.onnx", last_blocks=1,
                          embeddings=True)
    assert (info["quantized"], info["kept_fp32"], info["tables"]) == (2, 2, 1)
    q = onnx.load(tmp_path / "int8.onnx")
    fp32_matmuls = {n.name for n in q.graph.node if n.op_type == "MatMul"}
    assert {names[2], "/resizer/MatMul"} <= fp32_matmuls
    assert not {names[0], names[1]} & fp32_matmuls
    assert sum(n.op_type == "MatMulInteger" for n in q.graph.node) == 2
    eight_bit = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    int8_inits = [i for i in q.graph.initializer if i.data_type in eight_bit]
    assert any(tuple(i.dims) == (50, 48) for i in int8_inits)  # the token table
    feed = {"tokens": np.array([[3, 1, 4, 1, 5, 9, 2]], np.int64)}
    ref, got = (ort.InferenceSession(tmp_path / f).run(None, feed)[0]
                for f in ("fp32.onnx", "int8.onnx"))
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert 0 < rel < 0.05


def test_weight_only_blocks(tmp_path):
    pytest.importorskip("onnx_ir")  # onnxruntime's MatMulNBits quantiser needs it
    from napari_sam3_onnx.export.quantize import quantize_graph

    _blocks_graph(tmp_path / "fp32.onnx", np.random.default_rng(4))
    quantize_graph(tmp_path / "fp32.onnx", tmp_path / "w8.onnx", method="weight-only")
    ops = [n.op_type for n in onnx.load(tmp_path / "w8.onnx").graph.node]
    assert ops.count("MatMulNBits") == 3 and ops.count("MatMul") == 1  # /resizer/ kept


def test_token_table_fp16_is_far_closer_than_one_scale_int8(tmp_path):
    """The language encoder's token table: fp16 storage (the default) against 8-bit."""
    from napari_sam3_onnx.export.quantize import quantize_graph

    _blocks_graph(tmp_path / "fp32.onnx", np.random.default_rng(5))
    feed = {"tokens": np.array([[3, 1, 4, 1, 5, 9, 2]], np.int64)}
    ref = ort.InferenceSession(tmp_path / "fp32.onnx").run(None, feed)[0]
    err = {}
    for storage in ("fp16", "int8"):
        out = tmp_path / f"{storage}.onnx"
        # every linear layer kept fp32: only the table's storage differs
        info = quantize_graph(tmp_path / "fp32.onnx", out, exclude=("/",), embeddings=storage)
        assert info["tables"] == 1 and info["token_table"] == storage and info["quantized"] == 0
        got = ort.InferenceSession(out).run(None, feed)[0]
        err[storage] = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    q = onnx.load(tmp_path / "fp16.onnx")
    halves = [i for i in q.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16]
    assert [tuple(i.dims) for i in halves] == [(50, 48)]
    assert any(n.op_type == "Cast" and n.output[0] == "table" for n in q.graph.node)
    assert 0 < err["fp16"] < 1e-3 and err["int8"] > 10 * err["fp16"]
    with pytest.raises(ValueError, match="embeddings"):
        quantize_graph(tmp_path / "fp32.onnx", tmp_path / "x.onnx", embeddings="fp8")
