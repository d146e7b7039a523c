"""Pieces the package keeps one copy of stay single: the file hash and the atomic writer."""

from __future__ import annotations

import re
from pathlib import Path

import napari_sam3_onnx

ROOT = Path(napari_sam3_onnx.__file__).parent


def _sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(ROOT.rglob("*.py"))}


def test_one_file_hash():
    where = [name for name, text in _sources().items()
             if re.search(r"^def sha256\w*\(", text, flags=re.M)]
    assert where == ["models/hashing.py"]


def test_one_temp_and_rename_writer():
    # Temporary files for outputs come from models/atomic.py (exclusive names beside the
    # target, removed on any error), never from a module's own mkstemp-and-replace.
    sources = _sources()
    assert "models/atomic.py" in sources
    own = [name for name, text in sources.items() if "mkstemp(" in text]
    assert own == []
