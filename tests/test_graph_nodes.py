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


def _torch_sam_decoder(path, pads=True, hide=None):
    """The node pattern torch's exporter writes for SAM's prompt encoder behind a [1,1,N] layout.

    ``input_points [1,1,N,2]`` -> a batch ``Gather`` -> ``+ 0.5`` -> ``Concat`` with
    ``zeros((B, 1, 2))`` (B read through Shape/Gather, so a shape ``Concat`` with the constants
    1 and 2 hangs off the same tensor); ``input_labels [1,1,N]`` int32 -> ``Gather`` -> ``Cast``
    -> ``Concat`` with ``-ones((B, 1))``; then SAM's in-place coordinate normalisation
    (``ScatterND``), the positional ``MatMul`` and the label comparisons. ``hide``: put that op
    (with no effect) between the input and the rest.
    """
    b = GraphBuilder("torch_sam_prompt")
    pts = b.input("input_points", "float32", [1, 1, "n", 2])
    lab = b.input("input_labels", "int32", [1, 1, "n"])
    if hide == "Pad":  # edge padding: not a constant the check can compare
        pts = b.Pad(pts, b.const([0, 0, 0, 0, 0, 0, 1, 0], "int64"), mode="edge")
    elif hide == "side":  # an op the check does not know, on a branch beside the padding
        b.output(b.CumSum(pts, b.const(np.asarray(2, np.int64), "int64")), "side", "float32",
                 [1, 1, "n", 2])
    zero = b.const(np.asarray(0, np.int64), "int64")
    pts = b.Add(b.Gather(pts, zero, axis=1), _const_node(b, 0.5))
    lab = b.Cast(b.Gather(lab, zero, axis=1), to=1)
    batch = b.Unsqueeze(b.Gather(b.Shape(pts), zero, axis=0), b.const([0], "int64"))
    if pads:
        shape = b.Concat(batch, _const_node(b, [1], np.int64), _const_node(b, [2], np.int64),
                         axis=0)
        zeros = b.op("ConstantOfShape", [shape],
                     value=numpy_helper.from_array(np.zeros(1, np.float32)))
        pts = b.Concat(pts, zeros, axis=1)
        ones = b.op("ConstantOfShape", [b.Concat(batch, _const_node(b, [1], np.int64), axis=0)],
                    value=numpy_helper.from_array(np.ones(1, np.float32)))
        lab = b.Concat(lab, b.Neg(ones), axis=1)
    else:  # the same shape arithmetic, used for something else
        b.output(b.Concat(batch, _const_node(b, [1], np.int64), axis=0), "shape", "int64", [2])
    first = b.Gather(pts, zero, axis=2)  # coords[:, :, 0] = coords[:, :, 0] / width
    idx = b.const(np.zeros((1, 1), np.int64), "int64")
    pts = b.ScatterND(b.Transpose(pts, perm=[2, 0, 1]), idx,
                      b.Unsqueeze(b.Div(first, b.const(224.0)), b.const([0], "int64")))
    pts = b.Transpose(pts, perm=[1, 2, 0])
    emb = b.MatMul(b.Sub(b.Mul(pts, b.const(2.0)), b.const(1.0)), b.const(np.ones((2, 8),
                                                                           np.float32)))
    keep = b.Cast(b.Equal(lab, b.const(-1.0)), to=1)
    b.output(b.Add(b.ReduceSum(emb, keepdims=0), b.ReduceSum(keep, keepdims=0)), "out",
             "float32", [])
    return b.save(path)


@pytest.mark.parametrize("default", [True, False])
@pytest.mark.parametrize("hide", [None, "side"])
def test_padding_behind_a_batch_gather_is_the_graphs_own(default, hide, tmp_path):
    """Issue 29 item 7: torch's export of SAM's prompt encoder gathers the batch first."""
    path = _torch_sam_decoder(tmp_path / "dec.onnx", hide=hide)
    d = decide_padding(read_signature(path), "input_points", "input_labels", default)
    assert d.graph_pads and d.source == "graph dec.onnx"


def test_shape_arithmetic_on_the_prompt_is_not_a_sentinel(tmp_path):
    """Without padding the answer is 'absent', not misled by Concat([B], [1]) of its shape."""
    path = _torch_sam_decoder(tmp_path / "dec.onnx", pads=False)
    for default in (True, False):
        d = decide_padding(read_signature(path), "input_points", "input_labels", default)
        assert not d.graph_pads and d.source == "graph dec.onnx"


@pytest.mark.parametrize("default", [True, False])
def test_an_op_the_check_cannot_see_through_leaves_the_contract(default, tmp_path):
    path = _torch_sam_decoder(tmp_path / "dec.onnx", hide="Pad")
    d = decide_padding(read_signature(path), "input_points", "input_labels", default)
    assert d.graph_pads is default
    assert d.source.startswith("layout default") and "inconclusive" in d.source
    assert "Pad" in d.source and "dec.onnx" in d.source


@pytest.mark.parametrize("value, pads", [(0.0, True), (-5.0, False)])
def test_hugging_face_pad_spelling_counts_like_the_concat(value, pads, tmp_path):
    """``F.pad(points, (0, 0, 0, 1), value=0)`` / ``F.pad(labels, (0, 1), value=-1)``."""
    b = GraphBuilder("hf_pad")
    pts = b.Add(b.input("input_points", "float32", [1, 1, "n", 2]), b.const(0.5))
    lab = b.input("input_labels", "int64", [1, 1, "n"])
    pts = b.Pad(pts, b.const([0, 0, 0, 0, 0, 0, 1, 0], "int64"), b.const(value), mode="constant")
    lab = b.Pad(lab, b.const([0, 0, 0, 0, 0, 1], "int64"), b.const(np.asarray(-1, np.int64),
                                                                   "int64"))
    keep = b.Cast(b.Equal(lab, b.const(np.asarray(-1, np.int64), "int64")), to=1)
    b.output(b.Add(b.ReduceSum(b.MatMul(pts, b.const(np.ones((2, 4), np.float32))), keepdims=0),
                   b.ReduceSum(keep, keepdims=0)), "out", "float32", [])
    path = b.save(tmp_path / "dec.onnx")
    d = decide_padding(read_signature(path), "input_points", "input_labels", not pads)
    assert d.graph_pads is pads and d.source == "graph dec.onnx"


def test_inspect_says_when_the_graph_does_not_decide(tmp_path, capsys):
    """An op the check cannot see through: the layout's contract, and inspect says why."""
    import onnx
    from onnx import helper

    from napari_sam3_onnx.cli import main
    from napari_sam3_onnx.testing.jax_video import build_jax_video

    folder = build_jax_video(tmp_path / "jax", memory=False, pads=False)
    path = folder / "mask_decoder.onnx"
    model = onnx.load(str(path))
    for node in model.graph.node:  # route the points through an edge-mode Pad of nothing
        node.input[:] = ["points_edge" if i == "input_points" else i for i in node.input]
    zeros = numpy_helper.from_array(np.zeros(8, np.int64), "no_pads")
    model.graph.initializer.append(zeros)
    model.graph.node.insert(0, helper.make_node("Pad", ["input_points", "no_pads"],
                                                ["points_edge"], mode="edge"))
    onnx.save(model, str(path))
    assert main(["inspect", str(folder)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.strip().startswith("padding"))
    assert "graph pads itself" in line  # the jax-video contract, not a guess against it
    assert "layout default; graph mask_decoder.onnx inconclusive" in line
    assert "input_points meets a Pad in edge mode" in line, line
