"""Protobuf wire format, read straight from a file: varints, fields, and a walk over big reads.

What :mod:`.graph_info`, :mod:`.graph_nodes` and :mod:`.encoder_kind` need to read an ONNX
``ModelProto`` without loading it: :func:`fields` over a file-like object (small messages
already in memory), :func:`walk` over a file through a :class:`Window` of big reads (a whole
graph, passing over tensor data by position). Wire types follow protobuf's encoding guide
(0 varint, 1 64-bit, 2 length-delimited, 5 32-bit).
"""

from __future__ import annotations

from typing import BinaryIO


class Truncated(Exception):
    """The bytes end inside a field: a truncated or damaged file."""


def read_varint(f: BinaryIO) -> int:
    """The varint at ``f``'s position (one read per byte: for small in-memory messages)."""
    shift = 0
    value = 0
    while True:
        b = f.read(1)
        if not b:
            raise Truncated
        byte = b[0]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def fields(f: BinaryIO, end: int):
    """Yield ``(field_number, wire_type, length_or_value, start)`` up to byte ``end``.

    For length-delimited fields (wire type 2) the stream is left at the field's start; callers
    either read it or seek past it (``start + length``).
    """
    while f.tell() < end:
        key = read_varint(f)
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, read_varint(f), f.tell()
        elif wire == 1:
            data = f.read(8)
            if len(data) < 8:
                raise Truncated
            yield number, wire, int.from_bytes(data, "little"), f.tell()
        elif wire == 5:
            data = f.read(4)
            if len(data) < 4:
                raise Truncated
            yield number, wire, int.from_bytes(data, "little"), f.tell()
        elif wire == 2:
            length = read_varint(f)
            start = f.tell()
            if start + length > end:
                raise Truncated
            yield number, wire, length, start
            f.seek(start + length)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def read_exact(f: BinaryIO, start: int, length: int) -> bytes:
    """``length`` bytes of ``f`` from ``start``; :class:`Truncated` if the file ends first."""
    f.seek(start)
    data = f.read(length)
    if len(data) < length:
        raise Truncated
    return data


#: Bytes read at a time while walking a graph's fields: big reads (the interpreter is released
#: while the OS copies) and a Python-level loop over bytes in memory, not a call per byte. A
#: read after a jump (past a tensor's data) starts at :data:`FIRST_READ` and doubles while the
#: walk goes on reading where the last read ended, up to this.
CHUNK = 1 << 20
FIRST_READ = 4096
#: A key and a length varint together take at most this many bytes (10 + 10).
HEAD_BYTES = 20


class Window:
    """A file read in :data:`CHUNK`-sized pieces: the bytes around a position without a syscall.

    :meth:`at` returns the chunk holding ``[pos, pos + n)`` and ``pos``'s index in it; a large
    field (a tensor's ``raw_data``) is passed over by position and never read.
    """

    __slots__ = ("_base", "_buf", "_f", "_next")

    def __init__(self, f: BinaryIO) -> None:
        self._f, self._buf, self._base, self._next = f, b"", 0, FIRST_READ

    def at(self, pos: int, n: int) -> tuple[bytes, int]:
        """The chunk holding bytes ``[pos, pos + n)`` and ``pos``'s index in it."""
        i = pos - self._base
        if i < 0 or i + n > len(self._buf):
            on = 0 <= i <= len(self._buf)  # reading on from the last read, not jumping
            self._next = min(2 * self._next, CHUNK) if on else FIRST_READ
            self._f.seek(pos)
            self._buf, self._base, i = self._f.read(max(n, self._next)), pos, 0
            if len(self._buf) < n:
                raise Truncated
        return self._buf, i

    def read(self, pos: int, n: int) -> bytes:
        """The bytes ``[pos, pos + n)`` (a read larger than :data:`CHUNK` is not kept)."""
        if n > CHUNK:  # not kept in the window
            self._f.seek(pos)
            data = self._f.read(n)
            if len(data) < n:
                raise Truncated
            return data
        buf, i = self.at(pos, n)
        return buf[i:i + n]


def buffer_varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[i]`` (not past ``buf[end]``) and the index after it."""
    if i >= end:
        raise Truncated
    byte = buf[i]
    if byte < 0x80:
        return byte, i + 1
    value, shift = byte & 0x7F, 7
    i += 1
    while True:
        if i >= end:
            raise Truncated
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def walk(win: Window, pos: int, end: int):
    """:func:`fields` over the file bytes ``[pos, end)`` through ``win``.

    Yields ``(field_number, wire_type, length_or_value, start)``; for wire type 2, ``start``
    is where the field's bytes begin and the walk goes on at ``start + length`` whatever the
    caller reads. One-byte keys and lengths are decoded inline (a node list is thousands of
    them).
    """
    buf, base = b"", pos  # this walk's own view: the caller may move the window meanwhile
    while pos < end:
        i, need = pos - base, min(HEAD_BYTES, end - pos)
        if i < 0 or len(buf) - i < need:
            buf, i = win.at(pos, need)
            base = pos - i
        stop = min(len(buf), i + end - pos)
        key = buf[i]
        j = i + 1
        if key >= 0x80:
            key, j = buffer_varint(buf, i, stop)
        number, wire = key >> 3, key & 7
        if wire == 2:
            if j >= stop:
                raise Truncated
            length = buf[j]
            j += 1
            if length >= 0x80:
                length, j = buffer_varint(buf, j - 1, stop)
            start = pos + (j - i)
            if start + length > end:
                raise Truncated
            yield number, wire, length, start
            pos = start + length
        elif wire == 0:
            value, j = buffer_varint(buf, j, stop)
            pos += j - i
            yield number, wire, value, pos
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            at = pos + (j - i)
            if at + width > end:
                raise Truncated
            data = win.read(at, width)
            pos = at + width
            yield number, wire, int.from_bytes(data, "little"), pos
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
