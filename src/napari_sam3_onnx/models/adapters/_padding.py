"""Does a point decoder append SAM's padding point itself? Decided from its graph.

SAM's prompt encoder appends one point ``(0, 0)`` with label -1 whenever no separate box input is
given. An exporter either traced that into the graph (upstream ``_forward_sam_heads``, pagarcia,
this project's own export) or left it to the caller (SAM 1's official ONNX export). The graph
answers. Starting at the point-coordinate input, the tensor's *values* are followed forward
(:data:`VALUE_INPUTS`): through element-wise arithmetic (the +0.5 pixel-centre shift, the
normalisation), casts, reshapes, slices and gathers of it (a batch ``Gather`` such as
``points[:, 0]``), scatters into it, and concatenations that are not the padding; never through
``Shape``/``Size``, whose outputs are the tensor's shape, not its values. A ``Concat`` that joins
the followed tensor with a constant of zeros is SAM's padding; likewise the labels with a
constant -1. Constants are read through the nodes that build them (``ConstantOfShape``, ``Neg``,
casts, arithmetic on constants).

Three outcomes per input: *found*; *absent* (every path ended in an op that consumes the prompt,
:data:`CONSUMING_OPS`, such as the positional encoding's ``MatMul`` or the label comparisons,
or met a constant of other values, such as a far-away sentinel); *inconclusive* (an op this check
cannot see through: a sub-graph, a function or custom op, an unknown op; a constant or a ``Pad``
it cannot evaluate; an input nothing reads). A constant-mode ``Pad`` of the tensor (torch's
``F.pad``, as Hugging Face's prompt encoder pads) counts like the ``Concat``. Both found: the
graph pads. Inconclusive for either: the layout's contract decides, and ``inspect`` says why.
Otherwise the adapter appends the point. A graph whose nodes cannot be read leaves the layout's
contract too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CorruptModelError
from ..graph_info import GraphSignature
from ..graph_nodes import GraphNodes, Node, read_nodes

#: Op -> the input positions whose values flow to the output (None: every input).
VALUE_INPUTS: dict[str, tuple[int, ...] | None] = {
    **dict.fromkeys(("Identity", "Cast", "CastLike", "Neg", "Reshape", "Unsqueeze", "Squeeze",
                     "Flatten", "Expand", "Tile", "Transpose", "Slice", "Gather", "GatherND",
                     "GatherElements", "Split", "Clip", "Dropout"), (0,)),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Concat"), None),
    **dict.fromkeys(("ScatterND", "ScatterElements"), (0, 2)),
    "Where": (1, 2),
}
#: Ops that turn the prompt into something else (embeddings, masks of labels): a path ends there.
CONSUMING_OPS = frozenset({
    "MatMul", "Gemm", "Einsum", "Sin", "Cos", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "Not", "And", "Or", "Xor", "ReduceSum", "ReduceMean", "ReduceMax",
    "ReduceMin", "ReduceProd", "ArgMax", "ArgMin", "GridSample", "Conv", "Floor", "Ceil",
    "Round", "Abs", "Sign", "Exp", "Log", "Pow", "Sqrt", "Sigmoid", "Tanh", "Relu", "Softmax",
    "Min", "Max", "OneHot", "NonZero", "TopK", "Range", "LayerNormalization"})
#: Ops whose outputs describe a tensor's shape, not its values: not followed.
SHAPE_OPS = frozenset({"Shape", "Size"})
_ARITH = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}
_SAME = frozenset({"Cast", "Identity", "Reshape", "Unsqueeze", "Expand", "Squeeze", "Flatten",
                   "Tile", "CastLike"})


@dataclass(frozen=True)
class PaddingDecision:
    """Whether the graph pads, and how that was decided.

    Attributes
    ----------
    graph_pads : bool
        True: feed the prompt as is. False: append ``(0, 0)`` with label -1.
    source : str
        ``"graph <file>"`` (read from its nodes) or ``"layout default; ..."`` (the layout's
        contract) with the reason the graph did not decide it.
    """

    graph_pads: bool
    source: str

    def describe(self) -> str:
        """One line for ``inspect``."""
        what = ("the decoder graph appends (0, 0, -1) itself; the prompt is fed as is"
                if self.graph_pads else "the adapter appends (0, 0, -1) to every prompt")
        return f"{what} [{self.source}]"


@dataclass(frozen=True)
class _Walk:
    """What following one input found: ``"found"``, ``"absent"`` or ``"inconclusive"``."""

    outcome: str
    why: str = ""


def _value(nodes: GraphNodes, name: str, producer: dict[str, Node],
           depth: int = 0) -> np.ndarray | bool | None:
    """A constant's value, None if constant but unread, False if not constant."""
    if name in nodes.initializers:
        return nodes.initializers[name]
    node = producer.get(name)
    if node is None or depth > 32:
        return False if node is None else None  # a graph input (or a very deep constant)
    if node.op_type == "Constant":
        v = node.attrs.get("value")
        return v if isinstance(v, np.ndarray) else None
    if node.op_type == "ConstantOfShape":
        v = node.attrs.get("value")
        return v.reshape(-1)[:1] if isinstance(v, np.ndarray) else np.zeros(1, np.float32)
    if node.op_type in SHAPE_OPS:
        return None
    inputs = [i for i in node.inputs if i]
    vals = [_value(nodes, i, producer, depth + 1) for i in inputs]
    if any(v is False for v in vals) or not inputs:
        return False
    first = vals[0]
    if not isinstance(first, np.ndarray):
        return None
    if node.op_type == "Neg":
        return -first
    if node.op_type in _SAME:  # the values themselves are unchanged (shape aside)
        return first
    second = vals[1] if len(vals) > 1 else None
    if node.op_type in _ARITH and isinstance(second, np.ndarray):
        with np.errstate(all="ignore"):
            return np.asarray(_ARITH[node.op_type](first.astype(np.float64),
                                                   second.astype(np.float64)))
    return None


def _at_concat(nodes: GraphNodes, node: Node, reached: set[str], producer: dict[str, Node],
               want: float) -> _Walk | None:
    """A Concat joining the followed tensor: found, a sentinel (absent), unreadable, or None."""
    for other in (i for i in node.inputs if i and i not in reached):
        v = _value(nodes, other, producer)
        if v is None:
            return _Walk("inconclusive", f"meets a Concat with a constant it cannot read "
                         f"({other})")
        if isinstance(v, np.ndarray) and v.size:
            if np.allclose(v.astype(np.float64), want):
                return _Walk("found")
            return _Walk("absent", f"Concat with constant {v.reshape(-1)[:4].tolist()}")
    return None


def _at_pad(nodes: GraphNodes, node: Node, producer: dict[str, Node],
            want: float) -> _Walk | None:
    """A constant-mode ``Pad`` of the followed tensor (``F.pad(points, (0, 0, 0, 1))``).

    None: it pads nothing (a pass-through); found / absent by its constant; inconclusive when
    its mode or amounts cannot be read.
    """
    mode = node.attrs.get("mode", "constant")
    pads = _value(nodes, node.inputs[1], producer) if len(node.inputs) > 1 else None
    if mode != "constant":
        return _Walk("inconclusive", f"meets a Pad in {mode} mode")
    if not isinstance(pads, np.ndarray):
        return _Walk("inconclusive", "meets a Pad with amounts it cannot read")
    if not pads.any():
        return None
    has_value = len(node.inputs) > 2 and node.inputs[2]
    value = _value(nodes, node.inputs[2], producer) if has_value else np.zeros(1)
    if not isinstance(value, np.ndarray) or value.size != 1:
        return _Walk("inconclusive", "meets a Pad with a value it cannot read")
    if np.isclose(float(value.reshape(-1)[0]), want):
        return _Walk("found")
    return _Walk("absent", f"Pad with {float(value.reshape(-1)[0])}")


def _visit(nodes: GraphNodes, node: Node, t: str, reached: set[str],
           producer: dict[str, Node], want: float) -> tuple[_Walk | None, bool]:
    """What ``node`` says about the followed tensor ``t``: (a finding or None, follow on?)."""
    op = node.op_type
    if node.domain:
        return _Walk("inconclusive", f"reaches {node.domain}.{op}"), False
    if op in SHAPE_OPS or op in CONSUMING_OPS:
        return None, False
    if op == "Pad":
        if node.inputs[0] != t:
            return None, False
        padded = _at_pad(nodes, node, producer, want)
        return padded, padded is None or padded.outcome != "inconclusive"
    if op not in VALUE_INPUTS:
        return _Walk("inconclusive", f"reaches {op}, which this check cannot see through"), False
    positions = VALUE_INPUTS[op]
    if positions is not None and not any(
            i < len(node.inputs) and node.inputs[i] == t for i in positions):
        return None, False  # t is an index, a shape or a condition here, not the values
    if op == "Concat":
        return _at_concat(nodes, node, reached, producer, want), True
    return None, True


def _follow(nodes: GraphNodes, start: str, want: float) -> _Walk:
    """Follow ``start``'s values to a Concat (or Pad) with a constant equal to ``want``.

    A padding found on any path of ops it can read wins (a path is not followed past an op it
    cannot read); otherwise such an op or an unreadable constant makes the answer
    inconclusive; otherwise it is absent.
    """
    producer, consumers = nodes.producer(), nodes.consumers()
    if not consumers.get(start):
        return _Walk("inconclusive", "no node reads it")
    reached, todo = {start}, [start]
    findings: dict[str, _Walk] = {}
    while todo:
        t = todo.pop()
        for node in consumers.get(t, []):
            finding, onward = _visit(nodes, node, t, reached, producer, want)
            if finding is not None:
                if finding.outcome == "found":
                    return finding
                findings.setdefault(finding.outcome, finding)
            if onward:
                new = [o for o in node.outputs if o and o not in reached]
                reached.update(new)
                todo.extend(new)
    return findings.get("inconclusive") or findings.get("absent") or _Walk("absent")


def decide_padding(sig: GraphSignature, coords: str, labels: str,
                   default: bool) -> PaddingDecision:
    """Decide for the decoder ``sig`` with point inputs ``coords`` and ``labels``.

    ``default`` is the layout's contract, used (and said) when the graph does not decide it:
    its node list cannot be read, has no nodes at top level, or either walk is inconclusive.
    """
    contract = "layout default"
    try:
        nodes = read_nodes(sig.path)
    except (OSError, CorruptModelError) as exc:
        return PaddingDecision(default, f"{contract}; graph not readable: {exc}")
    if not nodes.nodes:
        return PaddingDecision(default, f"{contract}; no top-level nodes")
    walks = {coords: _follow(nodes, coords, 0.0), labels: _follow(nodes, labels, -1.0)}
    unsure = [f"{name} {w.why}" for name, w in walks.items() if w.outcome == "inconclusive"]
    if unsure:
        return PaddingDecision(default, f"{contract}; graph {sig.path.name} inconclusive: "
                               + "; ".join(unsure))
    return PaddingDecision(all(w.outcome == "found" for w in walks.values()),
                           f"graph {sig.path.name}")


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
