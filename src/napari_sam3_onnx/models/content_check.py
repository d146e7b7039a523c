"""Check that a file's bytes are what its name says, before a download is certified.

A hub, proxy or captive portal can answer a model URL with a login or error page and a 200
status, and a connection can end half-way. Hashing such a file on first download would certify
it, so every downloaded file is checked here first:

* no file may be a web page or markup: HTML in any form (a comment or ``<script>`` first, a
  ``<body>`` fragment), XML, in UTF-8 or UTF-16;
* an ``.onnx`` file must parse as an ONNX header (read without the weights,
  :func:`~.graph_info.read_signature`);
* external data (a file a graph in the folder names as its weights, whatever its name, and
  ``*.onnx_data``, ``*.data``, ``*.bin``, ``*.weights``) must not be plain text (an error
  message) and must be at least as long as every offset and length the graphs' headers
  reference in it (a file cut in half is refused);
* JSON must parse, must not be an error object (``{"error": ...}``), and the files an adapter
  reads keys from must have them (``constants.json``: ``image_mean`` and ``image_std``;
  ``tokenizer.json``: a ``model``);
* ``.npz`` must be a zip archive, ``.gz`` must start with the gzip magic.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from .errors import CorruptModelError, ModelFileMissingError, ModelFileUnreadableError
from .graph_info import read_signature

_SNIFF = 512
#: Names of binary weight files (more are recognised by a graph naming them).
_BINARY = re.compile(r".*(\.onnx[._]data|\.data|\.bin|\.weights|\.pb)$", re.IGNORECASE)
#: A markup document's first characters: a tag, a comment, a declaration or an XML prolog.
_MARKUP = re.compile(r"<(!--|!doctype|\?xml|/?[a-z][a-z0-9-]*[\s>/])", re.IGNORECASE)
#: Keys of a JSON error body (a server's answer instead of the file).
_ERROR_KEYS = {"error", "errors", "message", "detail", "status", "code", "statuscode",
               "error_description", "msg"}
#: Keys the adapters read from JSON files of these names.
REQUIRED_KEYS = {"constants.json": ("image_mean", "image_std"), "tokenizer.json": ("model",)}


def _text_of(head: bytes) -> str | None:
    """``head`` as text if it is text (UTF-8, or UTF-16 by its BOM or zero bytes), else None."""
    encodings = ["utf-8"]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        encodings = ["utf-16"]
    elif len(head) >= 8 and head[1:8:2] == b"\0\0\0\0":
        encodings = ["utf-16-le"]
    elif len(head) >= 8 and head[0:8:2] == b"\0\0\0\0":
        encodings = ["utf-16-be"]
    for encoding in encodings:
        for cut in range(4):  # the sniffed block may end inside a character
            try:
                text = head[: len(head) - cut].decode(encoding)
            except UnicodeDecodeError:
                continue
            return text.lstrip("\ufeff")
    return None


def _is_plain_text(text: str) -> bool:
    return all(c.isprintable() or c in "\t\r\n" for c in text)


def _markup(head: bytes) -> bool:
    text = _text_of(head)
    return text is not None and bool(_MARKUP.match(text.lstrip()))


def _needed_bytes(name: str, folder: Path) -> tuple[int, str] | None:
    """The most bytes any ``.onnx`` in ``folder`` references in the data file ``name``.

    Returns ``(bytes, graph file name)``, or None when no graph there names it.
    """
    best: tuple[int, str] | None = None
    for graph in sorted(folder.glob("*.onnx")):
        try:
            refs = read_signature(graph).external
        except (CorruptModelError, ModelFileMissingError, ModelFileUnreadableError, OSError):
            continue
        for ref in refs:
            if ref.location == name:
                end = ref.offset + (ref.length or 0)
                if best is None or end > best[0]:
                    best = (end, graph.name)
    return best


def _json_problem(path: Path, name: str) -> str | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"not valid JSON: {exc}"
    if isinstance(value, dict) and value and set(k.lower() for k in value) <= _ERROR_KEYS:
        return f"a server's error message, not the file ({json.dumps(value)[:120]})"
    need = REQUIRED_KEYS.get(name)
    if need is not None:
        if not isinstance(value, dict):
            return f"expected a JSON object with {', '.join(need)}"
        if missing := [k for k in need if k not in value]:
            return f"it has no {', '.join(missing)} (has {', '.join(sorted(value)[:8])})"
    return None


def _data_problem(path: Path, name: str, folder: Path, head: bytes) -> str | None:
    """External data: not text, and as long as the graphs beside it need."""
    need = _needed_bytes(name, folder)
    if need is None and not _BINARY.fullmatch(name):
        return None
    text = _text_of(head)
    if text is not None and _is_plain_text(text):
        return "it is text (an error message?), not model weights"
    size = path.stat().st_size
    if need is not None and size < need[0]:
        return f"cut short: {size} bytes, but {need[1]} needs {need[0]}"
    return None


def content_problem(path: Path | str, name: str | None = None,
                    folder: Path | str | None = None) -> str | None:
    """Why ``path`` does not hold what its name says, or None when it does.

    Parameters
    ----------
    path : Path or str
        A bundle file (``.onnx``, external data, ``.json``, ``.npz``, ``.gz``, a licence ...).
    name : str, optional
        The file's name in the bundle (default ``path``'s own; a download is checked where it
        landed, under another name).
    folder : Path or str, optional
        The bundle folder whose ``.onnx`` graphs say which files are their external data and
        how long (default ``path``'s folder).

    Returns
    -------
    str or None
        A short reason for people ("an HTML page, not model data"), None for a plausible file.
        Files of other kinds are only refused when they are markup.
    """
    path = Path(path)
    name = name or path.name
    folder = Path(folder) if folder is not None else path.parent
    lower = name.lower()
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not head:
        return "the file is empty"
    if _markup(head):
        return "it is an HTML page, not model data"
    if lower.endswith(".onnx"):
        try:
            read_signature(path)
        except CorruptModelError as exc:
            return f"not an ONNX model: {exc.reason}"
        return None
    if lower.endswith(".json"):
        return _json_problem(path, lower)
    if lower.endswith(".npz"):
        return None if zipfile.is_zipfile(path) else "not an .npz (zip) archive"
    if lower.endswith(".gz"):
        return None if head.startswith(b"\x1f\x8b") else "not a gzip file"
    return _data_problem(path, name, folder, head)
