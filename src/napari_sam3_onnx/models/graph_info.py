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
from .protobuf_wire import Truncated, Window, fields, read_exact, walk

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


def _parse_value_info(buf: bytes) -> TensorInfo:
    f = io.BytesIO(buf)
    name, dtype = "", "unknown"
    shape: tuple[Dim, ...] = ()
    for num, wire, ln, st in fields(f, len(buf)):
        if num == 1 and wire == 2:
            name = read_exact(f, st, ln).decode("utf-8")
        elif num == 2 and wire == 2:
            dtype, shape = _parse_type(read_exact(f, st, ln))
    return TensorInfo(name, dtype, shape)


def _parse_type(buf: bytes) -> tuple[str, tuple[Dim, ...]]:
    f = io.BytesIO(buf)
    for num, wire, ln, st in fields(f, len(buf)):
        if num == 1 and wire == 2:  # tensor_type
            return _parse_tensor_type(read_exact(f, st, ln))
    return "unknown", ()


def _parse_tensor_type(buf: bytes) -> tuple[str, tuple[Dim, ...]]:
    f = io.BytesIO(buf)
    dtype, dims = "unknown", []
    for num, wire, ln, st in fields(f, len(buf)):
        if num == 1 and wire == 0:
            dtype = ELEM_TYPES.get(ln, f"onnx-type-{ln}")
        elif num == 2 and wire == 2:
            g = io.BytesIO(read_exact(f, st, ln))
            for dnum, dwire, dln, dst in fields(g, ln):
                if dnum == 1 and dwire == 2:
                    dims.append(_parse_dim(read_exact(g, dst, dln)))
    return dtype, tuple(dims)


def _parse_dim(buf: bytes) -> Dim:
    f = io.BytesIO(buf)
    for num, wire, ln, st in fields(f, len(buf)):
        if num == 1 and wire == 0:
            return ln
        if num == 2 and wire == 2:
            return read_exact(f, st, ln).decode("utf-8")
    return None


def _parse_initializer(win: Window, pos: int, end: int) -> tuple[str, ExternalRef | None]:
    """Name and external-data reference of the TensorProto in ``[pos, end)`` (data skipped)."""
    name = ""
    external: dict[str, str] = {}
    is_external = False
    for num, wire, ln, st in walk(win, pos, end):
        if num == 8 and wire == 2:
            name = win.read(st, ln).decode("utf-8")
        elif num == 13 and wire == 2:
            entry = io.BytesIO(win.read(st, ln))
            key = value = ""
            for enum_, ewire, eln, est in fields(entry, ln):
                if ewire == 2 and enum_ in (1, 2):
                    text = read_exact(entry, est, eln).decode("utf-8")
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

    The file is walked field by field in :data:`~.protobuf_wire.CHUNK`-sized reads; node lists
    and tensor data are passed over by their lengths, so a 1.8 GB encoder costs its ~8,000 node
    headers and a few big reads. An unchanged file (same device, inode, size, mtime and ctime)
    is read once:
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
    win = Window(f)
    try:
        graph = None
        for num, wire, ln, st in walk(win, 0, size):
            if num == 7 and wire == 2:
                graph = (st, ln)
        if graph is None:
            raise CorruptModelError(path, "no graph found in the file")
        start, length = graph
        inputs: list[TensorInfo] = []
        outputs: list[TensorInfo] = []
        init_names: set[str] = set()
        refs: list[ExternalRef] = []
        for num, wire, ln, st in walk(win, start, start + length):
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
    except (Truncated, ValueError, UnicodeDecodeError) as exc:
        reason = "the file ends early" if isinstance(exc, Truncated) else str(exc) or "bad bytes"
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
