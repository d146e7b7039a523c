"""benchmarks/deep_encoder.py writes a deepened graph that onnx reads, with the blocks repeated."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from napari_sam3_onnx.models.graph_info import read_signature  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _reduced(path: Path) -> Path:
    """A two-block 'trunk' laid out as the exporter names it: block 0 windowed, block 1 global."""
    nodes, inits = [helper.make_node("Identity", ["pixel_values"], ["x0"], name="/trunk/patch")], []
    prev = "x0"
    for block, ops in ((0, 3), (1, 2)):
        w = numpy_helper.from_array(np.full((4, 4), block, np.float32),
                                    f"trunk.blocks.{block}.attn.qkv.weight")
        inits.append(w)
        out = f"/trunk/blocks.{block}/MatMul_output_0"
        nodes.append(helper.make_node("MatMul", [prev, w.name], [out],
                                      name=f"/trunk/blocks.{block}/attn/MatMul"))
        nodes.append(helper.make_node("Constant", [], [f"c{block}"], name=f"Constant_{block}",
                                      value=numpy_helper.from_array(np.ones(1, np.float32))))
        for k in range(ops):
            nxt = f"/trunk/blocks.{block}/Add_{k}_output_0"
            nodes.append(helper.make_node("Add", [out, f"c{block}"], [nxt],
                                          name=f"/trunk/blocks.{block}/Add_{k}"))
            out = nxt
        prev = out
    nodes.append(helper.make_node("Identity", [prev], ["det_fpn_0"], name="/neck/Identity"))
    g = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("det_fpn_0", TensorProto.FLOAT, [1, 4])],
        initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="pytorch")
    onnx.save(model, str(path))
    return path


def test_deepened_graph_is_read_by_onnx_and_by_us(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.deep_encoder import deepen

    src = _reduced(tmp_path / "reduced.onnx")
    counts = deepen(src, tmp_path / "deep.onnx", depth=6, global_blocks=(2, 5))
    m = onnx.load(str(tmp_path / "deep.onnx"), load_external_data=False)
    g = m.graph
    per_block = Counter(n.name.split("/")[2] for n in g.node if "/blocks." in n.name)
    # windowed blocks (0, 1, 3, 4) have block 0's 4 named nodes, global (2, 5) block 1's 3
    assert per_block == {f"blocks.{b}": 3 if b in (2, 5) else 4 for b in range(6)}
    assert counts["nodes"] == len(g.node) == 1 + 6 * 1 + 4 * 4 + 2 * 3 + 1
    assert counts["initializers"] == len(g.initializer) == 6
    assert len({t.name for t in g.initializer}) == 6  # every copy's weight renamed
    produced = [o for n in g.node for o in n.output]
    assert len(set(produced)) == len(produced)  # no tensor produced twice
    assert [o.version for o in m.opset_import] == [17] and m.producer_name == "pytorch"
    sig = read_signature(tmp_path / "deep.onnx")
    assert [t.name for t in sig.inputs] == ["pixel_values"]
    assert [t.name for t in sig.outputs] == ["det_fpn_0"]
    assert "benchmarks" in sys.modules
