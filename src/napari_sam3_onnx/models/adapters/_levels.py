"""Which outputs of a detector image encoder are feature levels, position encodings, tracker maps.

SAM 3's detector neck returns feature maps at 4x, 2x and 1x the top grid (288, 144, 72 px at
256 channels; some exports add a fourth at 36) and a sine position encoding of the same shape
for each level. The detector graphs take the three largest levels and (some of them) the top
level's position encoding. Exports name them differently (``backbone_fpn_*`` /
``vision_pos_enc_*``, ``fpn_hidden_state_*`` / ``fpn_position_encoding_*``, ``features_288``,
``fpn_feat_*`` / ``fpn_pos_*``) and one (PIXL) publishes no names, so an output is a position
encoding when its name says ``pos``, or, when no name does and shapes alone cannot tell levels
from encodings, when the graph computes it without reading the image (read from its nodes: a
constant). The Hugging Face tracker's ``image_embeddings.0/1/2`` (a dual encoder emits them too)
are never detector levels. Levels are ordered by size, largest first, never by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CorruptModelError
from ..graph_info import GraphSignature, TensorInfo
from ..graph_nodes import read_nodes

TRACKER_PREFIX = "image_embeddings"


@dataclass(frozen=True)
class EncoderOutputs:
    """An image encoder's outputs by role.

    Attributes
    ----------
    levels : list of TensorInfo
        The three largest feature levels, largest first (fewer if the graph has fewer).
    positions : dict
        Level index -> the position encoding of that level's shape.
    tracker : list of TensorInfo
        ``image_embeddings.*`` outputs (the SAM tracker's features), in name order.
    how : str
        How position encodings were told apart (``"names"``, ``"graph nodes"``, ``"none"``).
    """

    levels: list[TensorInfo]
    positions: dict[int, TensorInfo] = field(default_factory=dict)
    tracker: list[TensorInfo] = field(default_factory=list)
    how: str = "none"


def _size(t: TensorInfo) -> int:
    last = t.shape[-1]
    return last if isinstance(last, int) else 0


#: Ops whose output depends on their input's shape only, never on its values.
SHAPE_OPS = frozenset({"Shape", "Size"})


def constant_outputs(sig: GraphSignature) -> set[str] | None:
    """Outputs whose values do not depend on any graph input's values (None: nodes unreadable).

    Walking back from each output, ``Shape``/``Size`` nodes end the walk: a tensor built from
    an input's shape only (``zeros(batch, 1)`` traced as ``ConstantOfShape(Shape(x))``, a sine
    encoding of the grid) is as constant as an initializer.
    """
    try:
        nodes = read_nodes(sig.path)
    except (OSError, CorruptModelError):
        return None
    if not nodes.nodes:
        return None
    producer, inputs = nodes.producer(), sig.input_names
    out = set()
    for t in sig.outputs:
        seen, todo, reads = {t.name}, [t.name], False
        while todo and not reads:
            name = todo.pop()
            if name in inputs:
                reads = True
                break
            node = producer.get(name)
            if node is not None and node.op_type in SHAPE_OPS:
                continue
            for i in (node.inputs if node is not None else ()):
                if i and i not in seen:
                    seen.add(i)
                    todo.append(i)
        if not reads:
            out.add(t.name)
    return out


def split_outputs(sig: GraphSignature) -> EncoderOutputs:
    """Sort ``sig``'s rank-4 float outputs into levels, position encodings and tracker maps."""
    maps = [t for t in sig.outputs if t.rank == 4 and t.dtype.startswith("float")]
    tracker = sorted((t for t in maps if t.name.startswith(TRACKER_PREFIX)), key=lambda t: t.name)
    rest = [t for t in maps if t not in tracker]
    named = [t for t in rest if "pos" in t.name.lower()]
    how = "names" if named else "none"
    if not named and len({tuple(t.shape) for t in rest}) < len(rest):  # shapes cannot tell
        constant = constant_outputs(sig) or set()
        named = [t for t in rest if t.name in constant]
        how = "graph nodes" if named else "none"
    levels = sorted((t for t in rest if t not in named), key=lambda t: -_size(t))[:3]
    positions = {}
    for t in named:
        hit = next((i for i, lv in enumerate(levels) if tuple(lv.shape[1:]) == tuple(
            t.shape[1:]) and i not in positions), None)
        if hit is not None:
            positions[hit] = t
    return EncoderOutputs(levels, positions, tracker, how)
