"""File digests: the one SHA-256 of a file the package computes (downloads, stores, exports)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: Bytes read at a time.
BLOCK = 8 << 20


def sha256_file(path: Path | str, chunk: int = BLOCK) -> str:
    """Lower-case hex SHA-256 of a file, read ``chunk`` bytes at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: Path | str) -> tuple[str, int]:
    """``(sha256 hex, size in bytes)`` of a file, or of a folder's files (an OME-Zarr).

    A folder's digest covers each file's path relative to it (``/``-separated) and its
    bytes, in sorted order, so a renamed or changed member changes it.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    size = 0
    for f in files:
        if f != path:
            digest.update(os.fsencode(f.relative_to(path).as_posix()) + b"\0")
        with open(f, "rb") as fh:
            while block := fh.read(BLOCK):
                digest.update(block)
                size += len(block)
    return digest.hexdigest(), size
