"""Check that a file's bytes are what its name says, before a download is certified.

A hub, proxy or captive portal can answer a model URL with a login or error page and a 200
status. Hashing such a page on first download would certify it, so every downloaded file is
checked here first: an ``.onnx`` file must parse as an ONNX header (read without the weights,
:func:`~.graph_info.read_signature`), JSON must parse, ``.npz`` must be a zip archive, ``.gz``
must start with the gzip magic, and no file may be an HTML document.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from .errors import CorruptModelError
from .graph_info import read_signature

_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<?xml")
_SNIFF = 512


def _looks_like_html(head: bytes) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return text.startswith(_HTML_STARTS)


def content_problem(path: Path | str) -> str | None:
    """Why ``path`` does not hold what its name says, or None when it does.

    Parameters
    ----------
    path : Path or str
        A bundle file (``.onnx``, external data, ``.json``, ``.npz``, ``.gz``, a licence ...).

    Returns
    -------
    str or None
        A short reason for people ("an HTML page, not model data"), None for a plausible file.
        Files of other kinds are only refused when they are HTML.
    """
    path = Path(path)
    name = path.name.lower()
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not head:
        return "the file is empty"
    if _looks_like_html(head):
        return "it is an HTML page, not model data"
    if name.endswith(".onnx"):
        try:
            read_signature(path)
        except CorruptModelError as exc:
            return f"not an ONNX model: {exc.reason}"
    elif name.endswith(".json"):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return f"not valid JSON: {exc}"
    elif name.endswith(".npz") and not zipfile.is_zipfile(path):
        return "not an .npz (zip) archive"
    elif name.endswith(".gz") and not head.startswith(b"\x1f\x8b"):
        return "not a gzip file"
    return None
