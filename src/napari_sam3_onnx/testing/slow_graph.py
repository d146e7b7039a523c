"""A small ONNX graph that is slow on purpose: a chain of matmuls (tests and benchmarks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def build_slow_graph(path: Path, links: int = 300, side: int = 384,
                     gain: float = 1.0001) -> Path:
    """``y = x @ w @ w ... @ w`` saved at ``path``: ``links`` matmuls of ``(side, side)`` float32.

    ``w`` is ``gain`` times the identity. Many operators, so onnxruntime's
    ``RunOptions.terminate`` (read between operators) really stops a run part-way.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.eye(side, dtype=np.float32) * np.float32(gain), "w")
    nodes, prev = [], "x"
    for i in range(links):
        out = "y" if i == links - 1 else f"t{i}"
        nodes.append(helper.make_node("MatMul", [prev, "w"], [out]))
        prev = out
    graph = helper.make_graph(
        nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [side, side])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return Path(path)
