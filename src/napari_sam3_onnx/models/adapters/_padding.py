"""Does a point decoder append SAM's padding point itself? Decided from its graph.

SAM's prompt encoder appends one point ``(0, 0)`` with label -1 whenever no separate box input is
given. An exporter either traced that into the graph (upstream ``_forward_sam_heads``, pagarcia,
this project's own export) or left it to the caller (SAM 1's official ONNX export). The graph
answers: starting at the point-coordinate input, follow the tensor through value-preserving ops
(:data:`PASS_OPS`: casts, reshapes, the +0.5 pixel-centre shift) and look for a ``Concat`` that
joins it with a constant of zeros; likewise the labels with a constant -1. Both found: the graph
pads. Neither (nor a constant of other values, such as a far-away sentinel): the adapter must
append the padding point. A graph whose nodes cannot be read leaves the layout's default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CorruptModelError
from ..graph_info import GraphSignature
from ..graph_nodes import GraphNodes, read_nodes

#: Ops a point tensor passes through unchanged in meaning before the prompt embedding.
PASS_OPS = frozenset({"Identity", "Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Add",
                      "Sub", "Mul", "Div", "CastLike"})
#: Ops whose output is constant when every input is (``Shape`` makes shapes constant here).
CONST_OPS = frozenset({"Constant", "ConstantOfShape", "Shape", "Size"})


@dataclass(frozen=True)
class PaddingDecision:
    """Whether the graph pads, and how that was decided.

    Attributes
    ----------
    graph_pads : bool
        True: feed the prompt as is. False: append ``(0, 0)`` with label -1.
    source : str
        ``"graph"`` (read from its nodes) or ``"layout default (...)"``.
    """

    graph_pads: bool
    source: str

    def describe(self) -> str:
        """One line for ``inspect``."""
        what = ("the decoder graph appends (0, 0, -1) itself; the prompt is fed as is"
                if self.graph_pads else "the adapter appends (0, 0, -1) to every prompt")
        return f"{what} [{self.source}]"


def _value(nodes: GraphNodes, name: str, producer: dict) -> np.ndarray | bool | None:
    """A constant's value, None if constant but unread, False if not constant."""
    if name in nodes.initializers:
        return nodes.initializers[name]
    node = producer.get(name)
    if node is None:
        return False  # a graph input
    if node.op_type == "Constant":
        v = node.attrs.get("value")
        return v if isinstance(v, np.ndarray) else None
    if node.op_type == "ConstantOfShape":
        v = node.attrs.get("value")
        return v.reshape(-1)[:1] if isinstance(v, np.ndarray) else np.zeros(1, np.float32)
    if node.op_type in CONST_OPS:
        return None
    inputs = [i for i in node.inputs if i]
    vals = [_value(nodes, i, producer) for i in inputs]
    if any(v is False for v in vals) or not inputs:
        return False
    if node.op_type in ("Neg",) and isinstance(vals[0], np.ndarray):
        return -vals[0]
    if node.op_type in ("Cast", "Identity", "Reshape", "Unsqueeze", "Expand", "Squeeze"):
        return vals[0] if isinstance(vals[0], np.ndarray) else None
    return None


def _padded(nodes: GraphNodes, start: str, want: float) -> bool:
    """A Concat joins a value derived from ``start`` with a constant equal to ``want``."""
    producer, consumers = nodes.producer(), nodes.consumers()
    reached, todo = {start}, [start]
    while todo:
        t = todo.pop()
        for node in consumers.get(t, []):
            if node.op_type == "Concat":
                others = [i for i in node.inputs if i and i not in reached]
                for other in others:
                    v = _value(nodes, other, producer)
                    if v is None or (isinstance(v, np.ndarray) and v.size
                                     and np.allclose(v.astype(np.float64), want)):
                        return True
            elif node.op_type in PASS_OPS:
                for o in node.outputs:
                    if o not in reached:
                        reached.add(o)
                        todo.append(o)
    return False


def decide_padding(sig: GraphSignature, coords: str, labels: str,
                   default: bool) -> PaddingDecision:
    """Decide for the decoder ``sig`` with point inputs ``coords`` and ``labels``.

    ``default`` is used (and said) when the node list cannot be read or has no nodes at top level.
    """
    try:
        nodes = read_nodes(sig.path)
    except (OSError, CorruptModelError) as exc:
        return PaddingDecision(default, f"layout default; graph not readable: {exc}")
    if not nodes.nodes:
        return PaddingDecision(default, "layout default; no top-level nodes")
    pads = _padded(nodes, coords, 0.0) and _padded(nodes, labels, -1.0)
    return PaddingDecision(pads, f"graph {sig.path.name}")


def with_padding(points: np.ndarray, labels: np.ndarray, decision: PaddingDecision
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(N, 2)`` points and ``(N,)`` labels, plus ``(0, 0)`` / -1 unless the graph pads."""
    if decision.graph_pads:
        return points, labels
    pts = np.concatenate([np.asarray(points, np.float32).reshape(-1, 2),
                          np.zeros((1, 2), np.float32)])
    labs = np.concatenate([np.asarray(labels).reshape(-1),
                           np.full(1, -1, np.asarray(labels).dtype)])
    return pts, labs
