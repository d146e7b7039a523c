"""Read an ONNX file's inputs and outputs without loading its weights.

A SAM 3 image encoder is 1-2 GB; recognising a bundle's layout must not cost a session load per
file. ONNX files are protobuf ``ModelProto`` messages, so this module walks the wire format and
**seeks past** every large field (initializer data, node lists), reading only the graph's
``input``/``output`` value infos and the initializers' names and external-data references.

The file is read in big chunks and the walk runs over bytes in memory (no call per byte), so a
full-size encoder's header costs a few milliseconds of interpreter time, and an unchanged file
is walked once (:mod:`.header_cache`).

Field numbers follow onnx/onnx.proto (ModelProto.graph = 7; GraphProto.initializer = 5,
input = 11, output = 12; ValueInfoProto.name = 1, type = 2; TypeProto.tensor_type = 1;
Tensor.elem_type = 1, shape = 2; TensorShapeProto.dim = 1; Dimension.dim_value = 1,
dim_param = 2; TensorProto.name = 8, external_data = 13, data_location = 14).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from .errors import CorruptModelError, ModelFileMissingError, ModelFileUnreadableError
from .header_cache import HeaderCache

# TensorProto.DataType -> numpy-style name (onnx.proto).
ELEM_TYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    16: "bfloat16",
}

Dim = int | str | None


@dataclass(frozen=True)
class TensorInfo:
    """Name, element type and shape of one graph input or output.

    ``shape`` holds ints for fixed dims, the symbol (str) for named dynamic dims and None for
    unnamed ones.
    """

    name: str
    dtype: str
    shape: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)


@dataclass(frozen=True)
class ExternalRef:
    """Where one initializer's bytes live outside the .onnx file."""

    tensor: str
    location: str
    offset: int
    length: int | None


@dataclass(frozen=True)
class GraphSignature:
    """What a bundle's recogniser needs to know about one ONNX file."""

    path: Path
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    external: tuple[ExternalRef, ...] = ()

    @property
    def input_names(self) -> frozenset[str]:
        """Names of the graph inputs."""
        return frozenset(t.name for t in self.inputs)

    @property
    def output_names(self) -> frozenset[str]:
        """Names of the graph outputs."""
        return frozenset(t.name for t in self.outputs)

    @property
    def names(self) -> frozenset[str]:
        """Names of inputs and outputs together."""
        return self.input_names | self.output_names

    def input(self, name: str) -> TensorInfo:
        """The input called ``name`` (KeyError if absent)."""
        return _by_name(self.inputs, name)

    def output(self, name: str) -> TensorInfo:
        """The output called ``name`` (KeyError if absent)."""
        return _by_name(self.outputs, name)

    def describe(self) -> str:
        """One line: file name, inputs -> outputs."""
        ins = ", ".join(t.name for t in self.inputs)
        outs = ", ".join(t.name for t in self.outputs)
        return f"{self.path.name}: ({ins}) -> ({outs})"


def _by_name(infos: tuple[TensorInfo, ...], name: str) -> TensorInfo:
    for t in infos:
        if t.name == name:
            return t
    raise KeyError(name)


class _Truncated(Exception):
    pass


def _varint(f: BinaryIO) -> int:
    shift = 0
    value = 0
    while True:
        b = f.read(1)
        if not b:
            raise _Truncated
        byte = b[0]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _fields(f: BinaryIO, end: int):
    """Yield ``(field_number, wire_type, length_or_value, start)`` up to byte ``end``.

    For length-delimited fields (wire type 2) the stream is left at the field's start; callers
    either read it or seek past it (``start + length``).
    """
    while f.tell() < end:
        key = _varint(f)
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, _varint(f), f.tell()
        elif wire == 1:
            data = f.read(8)
            if len(data) < 8:
                raise _Truncated
            yield number, wire, int.from_bytes(data, "little"), f.tell()
        elif wire == 5:
            data = f.read(4)
            if len(data) < 4:
                raise _Truncated
            yield number, wire, int.from_bytes(data, "little"), f.tell()
        elif wire == 2:
            length = _varint(f)
            start = f.tell()
            if start + length > end:
                raise _Truncated
            yield number, wire, length, start
            f.seek(start + length)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _read(f: BinaryIO, start: int, length: int) -> bytes:
    f.seek(start)
    data = f.read(length)
    if len(data) < length:
        raise _Truncated
    return data


def _parse_value_info(buf: bytes) -> TensorInfo:
    f = io.BytesIO(buf)
    name, dtype = "", "unknown"
    shape: tuple[Dim, ...] = ()
    for num, wire, ln, st in _fields(f, len(buf)):
        if num == 1 and wire == 2:
            name = _read(f, st, ln).decode("utf-8")
        elif num == 2 and wire == 2:
            dtype, shape = _parse_type(_read(f, st, ln))
    return TensorInfo(name, dtype, shape)


def _parse_type(buf: bytes) -> tuple[str, tuple[Dim, ...]]:
    f = io.BytesIO(buf)
    for num, wire, ln, st in _fields(f, len(buf)):
        if num == 1 and wire == 2:  # tensor_type
            return _parse_tensor_type(_read(f, st, ln))
    return "unknown", ()


def _parse_tensor_type(buf: bytes) -> tuple[str, tuple[Dim, ...]]:
    f = io.BytesIO(buf)
    dtype, dims = "unknown", []
    for num, wire, ln, st in _fields(f, len(buf)):
        if num == 1 and wire == 0:
            dtype = ELEM_TYPES.get(ln, f"onnx-type-{ln}")
        elif num == 2 and wire == 2:
            g = io.BytesIO(_read(f, st, ln))
            for dnum, dwire, dln, dst in _fields(g, ln):
                if dnum == 1 and dwire == 2:
                    dims.append(_parse_dim(_read(g, dst, dln)))
    return dtype, tuple(dims)


def _parse_dim(buf: bytes) -> Dim:
    f = io.BytesIO(buf)
    for num, wire, ln, st in _fields(f, len(buf)):
        if num == 1 and wire == 0:
            return ln
        if num == 2 and wire == 2:
            return _read(f, st, ln).decode("utf-8")
    return None


#: Bytes read at a time while walking a graph's fields: big reads (the interpreter is released
#: while the OS copies) and a Python-level loop over bytes in memory, not a call per byte. A
#: read after a jump (past a tensor's data) starts at :data:`FIRST_READ` and doubles while the
#: walk goes on reading where the last read ended, up to this.
CHUNK = 1 << 20
FIRST_READ = 4096
#: A key and a length varint together take at most this many bytes (10 + 10).
_HEAD = 20


class _Window:
    """A file read in :data:`CHUNK`-sized pieces: the bytes around a position without a syscall.

    :meth:`at` returns the chunk holding ``[pos, pos + n)`` and ``pos``'s index in it; a large
    field (a tensor's ``raw_data``) is passed over by position and never read.
    """

    __slots__ = ("_base", "_buf", "_f", "_next")

    def __init__(self, f: BinaryIO) -> None:
        self._f, self._buf, self._base, self._next = f, b"", 0, FIRST_READ

    def at(self, pos: int, n: int) -> tuple[bytes, int]:
        i = pos - self._base
        if i < 0 or i + n > len(self._buf):
            on = 0 <= i <= len(self._buf)  # reading on from the last read, not jumping
            self._next = min(2 * self._next, CHUNK) if on else FIRST_READ
            self._f.seek(pos)
            self._buf, self._base, i = self._f.read(max(n, self._next)), pos, 0
            if len(self._buf) < n:
                raise _Truncated
        return self._buf, i

    def read(self, pos: int, n: int) -> bytes:
        if n > CHUNK:  # not kept in the window
            self._f.seek(pos)
            data = self._f.read(n)
            if len(data) < n:
                raise _Truncated
            return data
        buf, i = self.at(pos, n)
        return buf[i:i + n]


def _uvarint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[i]`` (not past ``buf[end]``) and the index after it."""
    if i >= end:
        raise _Truncated
    byte = buf[i]
    if byte < 0x80:
        return byte, i + 1
    value, shift = byte & 0x7F, 7
    i += 1
    while True:
        if i >= end:
            raise _Truncated
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _walk(win: _Window, pos: int, end: int):
    """:func:`_fields` over the file bytes ``[pos, end)`` through ``win``.

    Yields ``(field_number, wire_type, length_or_value, start)``; for wire type 2, ``start``
    is where the field's bytes begin and the walk goes on at ``start + length`` whatever the
    caller reads. One-byte keys and lengths are decoded inline (a node list is thousands of
    them).
    """
    buf, base = b"", pos  # this walk's own view: the caller may move the window meanwhile
    while pos < end:
        i, need = pos - base, min(_HEAD, end - pos)
        if i < 0 or len(buf) - i < need:
            buf, i = win.at(pos, need)
            base = pos - i
        stop = min(len(buf), i + end - pos)
        key = buf[i]
        j = i + 1
        if key >= 0x80:
            key, j = _uvarint(buf, i, stop)
        number, wire = key >> 3, key & 7
        if wire == 2:
            if j >= stop:
                raise _Truncated
            length = buf[j]
            j += 1
            if length >= 0x80:
                length, j = _uvarint(buf, j - 1, stop)
            start = pos + (j - i)
            if start + length > end:
                raise _Truncated
            yield number, wire, length, start
            pos = start + length
        elif wire == 0:
            value, j = _uvarint(buf, j, stop)
            pos += j - i
            yield number, wire, value, pos
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            at = pos + (j - i)
            if at + width > end:
                raise _Truncated
            data = win.read(at, width)
            pos = at + width
            yield number, wire, int.from_bytes(data, "little"), pos
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _parse_initializer(win: _Window, pos: int, end: int) -> tuple[str, ExternalRef | None]:
    """Name and external-data reference of the TensorProto in ``[pos, end)`` (data skipped)."""
    name = ""
    external: dict[str, str] = {}
    is_external = False
    for num, wire, ln, st in _walk(win, pos, end):
        if num == 8 and wire == 2:
            name = win.read(st, ln).decode("utf-8")
        elif num == 13 and wire == 2:
            entry = io.BytesIO(win.read(st, ln))
            key = value = ""
            for enum_, ewire, eln, est in _fields(entry, ln):
                if ewire == 2 and enum_ in (1, 2):
                    text = _read(entry, est, eln).decode("utf-8")
                    key, value = (text, value) if enum_ == 1 else (key, text)
            external[key] = value
        elif num == 14 and wire == 0:
            is_external = ln == 1
    if not is_external or "location" not in external:
        return name, None
    length = external.get("length")
    return name, ExternalRef(
        name, external["location"], int(external.get("offset", 0)),
        int(length) if length else None,
    )


def read_signature(path: Path | str) -> GraphSignature:
    """Read the inputs, outputs and external-data references of an ONNX file.

    The file is walked field by field in :data:`CHUNK`-sized reads; node lists and tensor data
    are passed over by their lengths, so a 1.8 GB encoder costs its ~8,000 node headers and a
    few big reads. An unchanged file (same device, inode, size, mtime and ctime) is read once:
    :data:`SIGNATURES` keeps the answer.

    Parameters
    ----------
    path : Path or str
        An ``.onnx`` file.

    Returns
    -------
    GraphSignature
        Inputs and outputs with dtype and shape; initializers are excluded from the inputs.

    Raises
    ------
    ModelFileMissingError
        The file does not exist.
    CorruptModelError
        The file is truncated or not an ONNX model.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileMissingError(path)
    if path.stat().st_size == 0:
        raise CorruptModelError(path, "the file is empty")
    if not os.access(path, os.R_OK):
        raise ModelFileUnreadableError(path)
    signature = SIGNATURES.get(path, _read_signature)  # kept by inode: another name of it
    return signature if signature.path == path else replace(signature, path=path)


def _read_signature(path: Path, f: BinaryIO, size: int) -> GraphSignature:
    """:func:`read_signature`'s walk over the open file ``f`` of ``size`` bytes."""
    win = _Window(f)
    try:
        graph = None
        for num, wire, ln, st in _walk(win, 0, size):
            if num == 7 and wire == 2:
                graph = (st, ln)
        if graph is None:
            raise CorruptModelError(path, "no graph found in the file")
        start, length = graph
        inputs: list[TensorInfo] = []
        outputs: list[TensorInfo] = []
        init_names: set[str] = set()
        refs: list[ExternalRef] = []
        for num, wire, ln, st in _walk(win, start, start + length):
            if wire != 2:
                continue
            if num in (11, 12):
                info = _parse_value_info(win.read(st, ln))
                (inputs if num == 11 else outputs).append(info)
            elif num == 5:
                name, ref = _parse_initializer(win, st, st + ln)
                init_names.add(name)
                if ref is not None:
                    refs.append(ref)
    except (_Truncated, ValueError, UnicodeDecodeError) as exc:
        reason = "the file ends early" if isinstance(exc, _Truncated) else str(exc) or "bad bytes"
        raise CorruptModelError(path, reason) from exc
    if not outputs:
        raise CorruptModelError(path, "the graph declares no outputs")
    inputs = [t for t in inputs if t.name not in init_names]
    return GraphSignature(path, tuple(inputs), tuple(outputs), tuple(refs))


#: Signatures already read, by file identity (:class:`.header_cache.HeaderCache`).
SIGNATURES: HeaderCache[GraphSignature] = HeaderCache()


def check_external_data(signature: GraphSignature) -> None:
    """Check that every external-data file a graph names exists and is long enough.

    Raises
    ------
    ModelFileMissingError
        A data file named by the graph is not beside it.
    CorruptModelError
        A data file is shorter than the graph's references need (a truncated download).
    """
    folder = signature.path.parent
    need: dict[str, int] = {}
    for ref in signature.external:
        end = ref.offset + (ref.length or 0)
        need[ref.location] = max(need.get(ref.location, 0), end)
    for location, end in need.items():
        data = folder / location
        if not data.is_file():
            raise ModelFileMissingError(
                data, f"The graph {signature.path.name} keeps its weights there; put the file "
                "beside it with exactly this name."
            )
        if not os.access(data, os.R_OK):
            raise ModelFileUnreadableError(data, "weights file")
        if data.stat().st_size < end:
            raise CorruptModelError(
                data, f"it has {data.stat().st_size} bytes but {signature.path.name} needs {end}"
            )
