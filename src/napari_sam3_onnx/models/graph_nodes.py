"""Read an ONNX graph's node list (and its small constants) without loading its weights.

``onnx`` is not a runtime dependency, so this walks the protobuf wire format with the reader of
:mod:`.graph_info`. Only the top-level graph's nodes are read (sub-graphs of ``If``/``Loop`` and
model-local functions are not), and only initializers of at most :data:`SMALL` elements keep their
values; large initializers are skipped by seeking, so reading a decoder costs its node list only.

Field numbers (onnx/onnx.proto): GraphProto.node = 1, initializer = 5; NodeProto.input = 1,
output = 2, op_type = 4, attribute = 5, domain = 7; AttributeProto.name = 1, f = 2, i = 3, s = 4,
t = 5, floats = 7, ints = 8; TensorProto.dims = 1, data_type = 2, float_data = 4, int32_data = 5,
int64_data = 7, name = 8, raw_data = 9, double_data = 10.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np

from .errors import CorruptModelError
from .header_cache import HeaderCache
from .protobuf_wire import Truncated, Window, fields, read_exact, read_varint, walk

#: Initializers / Constant tensors with at most this many elements keep their values.
SMALL = 64
_NP = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64,
       2: np.uint8, 3: np.int8}


@dataclass(frozen=True)
class Node:
    """One node: op type, input and output tensor names, small constant attribute values.

    ``domain`` is the operator set's domain (``""`` for standard ONNX; a model-local function's
    or a custom op's domain otherwise).
    """

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, object] = field(default_factory=dict)
    domain: str = ""


@dataclass(frozen=True)
class GraphNodes:
    """The nodes of a graph and its initializers (name -> small value, or None when large)."""

    nodes: tuple[Node, ...]
    initializers: dict[str, np.ndarray | None]

    def producer(self) -> dict[str, Node]:
        """Tensor name -> the node that produces it."""
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        """Tensor name -> the nodes that read it."""
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                out.setdefault(i, []).append(n)
        return out


def _packed(buf: bytes, wire: int, value: int, fmt: str) -> list:
    if wire == 2:
        size = struct.calcsize(fmt)
        return list(struct.unpack(f"<{len(buf) // size}{fmt}", buf))
    return [value]


def _varints(buf: bytes) -> list[int]:
    f, out = io.BytesIO(buf), []
    while f.tell() < len(buf):
        out.append(read_varint(f))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _tensor(f: BinaryIO, end: int) -> tuple[str, np.ndarray | None]:
    """Name and (small) value of a TensorProto; large payloads are skipped, not read."""
    name, dims, dtype, raw, values = "", [], 1, None, []
    for num, wire, ln, st in fields(f, end):
        if num == 1:
            dims += [_signed(v) for v in (_varints(read_exact(f, st, ln)) if wire == 2 else [ln])]
        elif num == 2 and wire == 0:
            dtype = ln
        elif num == 8 and wire == 2:
            name = read_exact(f, st, ln).decode("utf-8")
        elif num == 9 and wire == 2 and ln <= SMALL * 8:
            raw = read_exact(f, st, ln)
        elif num in (4, 5, 7, 10) and (wire != 2 or ln <= SMALL * 8):
            data = read_exact(f, st, ln) if wire == 2 else b""
            if num == 4:
                values += _packed(data, wire, ln, "f") if wire == 2 else [
                    struct.unpack("<f", ln.to_bytes(4, "little"))[0]]
            elif num == 10:
                values += _packed(data, wire, ln, "d") if wire == 2 else [
                    struct.unpack("<d", ln.to_bytes(8, "little"))[0]]
            else:
                values += [_signed(v) for v in (_varints(data) if wire == 2 else [ln])]
    count = int(np.prod(dims)) if dims else 1
    np_type = _NP.get(dtype)
    if count > SMALL or np_type is None:
        return name, None
    arr: np.ndarray
    if raw is not None:
        arr = np.frombuffer(raw, np_type)
    elif values:
        arr = np.asarray(values).astype(np_type)
    else:
        return name, None
    return name, arr.reshape(dims) if arr.size == count else None


def _attribute(buf: bytes) -> tuple[str, object]:
    f = io.BytesIO(buf)
    name, value = "", None
    for num, wire, ln, st in fields(f, len(buf)):
        if num == 1 and wire == 2:
            name = read_exact(f, st, ln).decode("utf-8")
        elif num == 2 and wire == 5:
            value = struct.unpack("<f", ln.to_bytes(4, "little"))[0]
        elif num == 3 and wire == 0:
            value = _signed(ln)
        elif num == 4 and wire == 2 and ln <= 256:
            value = read_exact(f, st, ln).decode("utf-8", "replace")
        elif num == 5 and wire == 2:
            f.seek(st)
            value = _tensor(f, st + ln)[1]
        elif num == 8:
            ints = [_signed(v) for v in (_varints(read_exact(f, st, ln)) if wire == 2 else [ln])]
            value = [*(value if isinstance(value, list) else []), *ints]
    return name, value


def _node(buf: bytes) -> Node:
    f = io.BytesIO(buf)
    op, domain = "", ""
    ins: list[str] = []
    outs: list[str] = []
    attrs: dict[str, object] = {}
    for num, wire, ln, st in fields(f, len(buf)):
        if wire != 2:
            continue
        if num in (1, 2):
            (ins if num == 1 else outs).append(read_exact(f, st, ln).decode("utf-8"))
        elif num == 4:
            op = read_exact(f, st, ln).decode("utf-8")
        elif num == 7:
            domain = read_exact(f, st, ln).decode("utf-8")
        elif num == 5:
            key, value = _attribute(read_exact(f, st, ln))
            attrs[key] = value
    return Node(op, tuple(ins), tuple(outs), attrs, "" if domain == "ai.onnx" else domain)


def read_nodes(path: Path | str) -> GraphNodes:
    """The top-level nodes and small initializers of an ONNX file.

    Read in big chunks (large initializers passed over by length); an unchanged file is read
    once (:data:`NODES`). Callers only read the answer: it is shared.

    Raises
    ------
    CorruptModelError
        The file is truncated or not an ONNX model.
    """
    return NODES.get(Path(path), _read_nodes)


def _read_nodes(path: Path, f: BinaryIO, size: int) -> GraphNodes:
    win = Window(f)
    try:
        graph = next(((st, ln) for num, wire, ln, st in walk(win, 0, size)
                      if num == 7 and wire == 2), None)
        if graph is None:
            raise CorruptModelError(path, "no graph found in the file")
        start, length = graph
        nodes, inits = [], {}
        for num, wire, ln, st in walk(win, start, start + length):
            if wire != 2:
                continue
            if num == 1:
                nodes.append(_node(win.read(st, ln)))
            elif num == 5:
                name, value = _tensor(cast(BinaryIO, _WindowFile(win, st)), st + ln)
                inits[name] = value
    except (Truncated, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise CorruptModelError(path, str(exc) or "bad bytes") from exc
    return GraphNodes(tuple(nodes), inits)


class _WindowFile:
    """A file-like view of a :class:`~.protobuf_wire.Window` at ``pos`` (for :func:`_tensor`)."""

    def __init__(self, win: Window, pos: int) -> None:
        self._win, self._pos = win, pos

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else self._pos + pos
        return self._pos

    def read(self, n: int) -> bytes:
        data = self._win.read(self._pos, n)  # exactly n bytes, or Truncated
        self._pos += n
        return data


#: Node lists already read, by file identity (:class:`.header_cache.HeaderCache`).
NODES: HeaderCache[GraphNodes] = HeaderCache(entries=16)
