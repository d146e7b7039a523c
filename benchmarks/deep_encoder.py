"""A full-depth image encoder's *file* from a reduced export: the header a real one has, to parse.

Exporting SAM 3 at full depth takes ~12 GB and many minutes; the bundle-load benchmark only
needs what opening a bundle reads, the graph file's protobuf. A reduced export
(``python -m napari_sam3_onnx.export --reduced``: the real ViT at depth 2, block 0 windowed,
block 1 global) has every block's real nodes (names, attributes, Constant tensors) and real
full-width weights (~56 MB a block, inline like the exporter writes them below protobuf's 2 GB).
:func:`deepen` repeats those two blocks to SAM 3's depth (32 blocks, global attention at 7, 15,
23, 31), renaming each copy's node names, produced tensors and weights, and writes the result
streamed in the exporter's field order: ``ir_version``, ``producer_*``, the graph (nodes,
initializers with ``raw_data``, inputs, outputs, value infos), ``opset_import``. The result has
8,437 nodes, 331 initializers and 1.8 GB of inline weights, the full-depth export's size (the
full export's header: the same per-block pattern). Its copies are not chained (each copied
block reads the template block's input; its tensors and weights carry a ``__bN`` suffix, the
last block keeps the template's output names, which the neck reads), so it is a file to
*open*, not to run.

Usage::

    python -m benchmarks.deep_encoder REDUCED/image_encoder.onnx OUT/image_encoder.onnx
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

DEPTH = 32
GLOBAL_BLOCKS = (7, 15, 23, 31)


def _key(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _block_range(graph, block: int) -> tuple[int, int]:
    """Nodes ``[lo, hi)``: from the block's first named node to its last (the exporter's
    unscoped Constant/Identity nodes in between are the block's too)."""
    at = [i for i, n in enumerate(graph.node) if f"/blocks.{block}/" in n.name]
    if not at:
        raise ValueError(f"no nodes of block {block} in the graph")
    inside = {m.group(1) for n in graph.node[at[0]:at[-1] + 1]
              if (m := re.search(r"/blocks\.(\d+)/", n.name))}
    if inside != {str(block)}:
        raise ValueError(f"block {block}'s nodes are interleaved with blocks {inside}")
    return at[0], at[-1] + 1


def _copies(graph, inits: dict, template: int, block: int, last: bool) -> Iterator[tuple]:
    """``(nodes, initializers)`` of ``block`` made from ``template`` (renamed unless the same)."""
    import onnx

    lo, hi = _block_range(graph, template)
    nodes = graph.node[lo:hi]
    if block == template:
        yield list(nodes), [inits[n] for n in _weights(nodes, inits)]
        return
    produced = {o for n in nodes for o in n.output}
    own = _weights(nodes, inits)
    tag = f"blocks.{template}"
    keep = produced if last else set()  # the last block's outputs feed the neck: kept

    def rename(name: str) -> str:
        if name in keep or (name not in produced and name not in own):
            return name  # read from outside the block (or read by the neck): kept
        return f"{name}__b{block}"  # unique: no copy's tensor takes another block's name

    out_nodes = []
    for n in nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.name = n.name.replace(tag, f"blocks.{block}")
        c.input[:] = [rename(i) for i in n.input]
        c.output[:] = [rename(o) for o in n.output]
        out_nodes.append(c)
    out_inits = []
    for name in own:
        t = onnx.TensorProto()
        t.CopyFrom(inits[name])
        t.name = rename(name)
        out_inits.append(t)
    yield out_nodes, out_inits


def _weights(nodes, inits: dict) -> list[str]:
    """Initializers read by ``nodes`` only (in first-use order)."""
    seen: dict[str, None] = {}
    for n in nodes:
        for i in n.input:
            if i in inits:
                seen.setdefault(i)
    return list(seen)


def _pieces(model, depth: int, global_blocks: tuple[int, ...]) -> Iterator[bytes]:
    """The graph's serialized fields in the exporter's order (nodes, name, initializers, ...)."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    (w0, w0_end), (g0, g0_end) = _block_range(g, 0), _block_range(g, 1)
    if w0_end != g0:
        raise ValueError("expected block 0 (windowed) right before block 1 (global)")
    blocks = [_copies(g, inits, 1 if b in global_blocks else 0, b, b == depth - 1)
              for b in range(depth)]
    per_block = [next(it) for it in blocks]
    template_weights = set(_weights(g.node[w0:g0_end], inits))
    for n in g.node[:w0]:
        yield _field(1, n.SerializeToString())
    for nodes, _ in per_block:
        for n in nodes:
            yield _field(1, n.SerializeToString())
    for n in g.node[g0_end:]:
        yield _field(1, n.SerializeToString())
    if g.name:
        yield _field(2, g.name.encode())
    for t in g.initializer:
        if t.name not in template_weights:
            yield _field(5, t.SerializeToString())
    for _, weights in per_block:
        for t in weights:
            yield _field(5, t.SerializeToString())
    for number, items in ((11, g.input), (12, g.output), (13, g.value_info)):
        for v in items:
            yield _field(number, v.SerializeToString())


def deepen(reduced: Path, out: Path, depth: int = DEPTH,
           global_blocks: tuple[int, ...] = GLOBAL_BLOCKS) -> dict[str, int]:
    """Write ``out``: the reduced encoder ``reduced`` at ``depth`` blocks; returns its counts."""
    import onnx

    model = onnx.load(str(reduced), load_external_data=False)
    size = sum(len(p) for p in _pieces(model, depth, global_blocks))  # first pass: the length
    head = onnx.ModelProto()
    for name in ("ir_version", "producer_name", "producer_version", "domain", "model_version",
                 "doc_string"):
        setattr(head, name, getattr(model, name))
    tail = onnx.ModelProto()
    tail.opset_import.extend(model.opset_import)
    tail.metadata_props.extend(model.metadata_props)
    tail.functions.extend(model.functions)
    nodes = inits = 0
    tmp = out.with_name(out.name + ".part")
    with tmp.open("wb") as f:
        f.write(head.SerializeToString())
        f.write(_key(7, 2) + _varint(size))
        for piece in _pieces(model, depth, global_blocks):
            nodes += piece[0] == 0x0A
            inits += piece[0] == 0x2A
            f.write(piece)
        f.write(tail.SerializeToString())
    tmp.replace(out)
    return {"nodes": nodes, "initializers": inits, "bytes": out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reduced", type=Path, help="a reduced export's image_encoder.onnx")
    parser.add_argument("out", type=Path)
    parser.add_argument("--depth", type=int, default=DEPTH)
    args = parser.parse_args(argv)
    counts = deepen(args.reduced, args.out, args.depth)
    print(", ".join(f"{k} {v:,}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

