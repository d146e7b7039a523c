"""The node reader and the padding decision on the ways exporters spell SAM's padding point."""

import numpy as np
import pytest
from onnx import numpy_helper

from napari_sam3_onnx.models.adapters._padding import decide_padding
from napari_sam3_onnx.models.graph_info import read_signature
from napari_sam3_onnx.models.graph_nodes import SMALL, read_nodes
from napari_sam3_onnx.testing.builder import GraphBuilder


def _const_node(b, value, dtype=np.float32):
    return b.op("Constant", [], value=numpy_helper.from_array(np.asarray(value, dtype)))


def _decoder(path, coords_pad, labels_pad):
    """points [1,N,2], labels [1,N] -> a sum; the pads are built as a torch export would."""
    b = GraphBuilder("pad_probe")
    pts = b.input("point_coords", "float32", [1, "n", 2])
    lab = b.input("point_labels", "float32", [1, "n"])
    pts = b.Add(pts, b.const(0.5))  # SAM's shift to pixel centres comes first
    if coords_pad == "constant":
        pts = b.Concat(pts, _const_node(b, [[[0.0, 0.0]]]), axis=1)
    elif coords_pad == "dynamic":  # zeros((B, 1, 2)) with B read from the input's shape
        batch = b.Gather(b.Shape(pts), b.const([0], "int64"), axis=0)
        shape = b.Concat(batch, b.const([1, 2], "int64"), axis=0)
        zeros = b.op("ConstantOfShape", [shape],
                     value=numpy_helper.from_array(np.zeros(1, np.float32)))
        pts = b.Concat(pts, zeros, axis=1)
    elif coords_pad == "sentinel":
        pts = b.Concat(pts, b.const([[[-1e4, -1e4]]]), axis=1)
    if labels_pad == "constant":
        lab = b.Concat(lab, _const_node(b, [[-1.0]]), axis=1)
    elif labels_pad == "neg":  # -ones((B, 1))
        ones = b.op("ConstantOfShape", [b.const([1, 1], "int64")],
                    value=numpy_helper.from_array(np.ones(1, np.float32)))
        lab = b.Concat(lab, b.Neg(ones), axis=1)
    emb = b.MatMul(b.Reshape(pts, b.const([-1, 2], "int64")), b.const(np.ones((2, 600),
                                                                            np.float32)))
    tokens = b.Concat(b.const(np.zeros((4, 600), np.float32)), emb, axis=0)  # not padding
    b.output(b.Add(b.ReduceSum(tokens, keepdims=0), b.ReduceSum(lab, keepdims=0)), "out",
             "float32", [])
    return b.save(path, external_data=path.name + ".data")


@pytest.mark.parametrize("coords, labels, pads", [
    ("constant", "constant", True),
    ("dynamic", "neg", True),
    ("none", "none", False),
    ("sentinel", "constant", False),  # a far sentinel is not (0, 0)
    ("constant", "none", False),  # both inputs must be padded
])
def test_padding_spelt_as_exporters_spell_it(coords, labels, pads, tmp_path):
    path = _decoder(tmp_path / "dec.onnx", coords, labels)
    d = decide_padding(read_signature(path), "point_coords", "point_labels", not pads)
    assert d.graph_pads is pads and d.source == "graph dec.onnx"


def test_reader_keeps_small_constants_and_skips_weights(tmp_path):
    path = _decoder(tmp_path / "dec.onnx", "constant", "constant")
    nodes = read_nodes(path)
    ops = [n.op_type for n in nodes.nodes]
    assert ops.count("Concat") == 3 and "MatMul" in ops
    const = next(n for n in nodes.nodes if n.op_type == "Constant")
    np.testing.assert_array_equal(const.attrs["value"], [[[0.0, 0.0]]])
    big = [v for v in nodes.initializers.values() if v is None]
    assert len(big) == 2  # the 2 x 600 weight and the token table: names only
    assert all(v.size <= SMALL for v in nodes.initializers.values() if v is not None)
    assert 0.5 in [float(v) for v in nodes.initializers.values() if v is not None and v.size == 1]
