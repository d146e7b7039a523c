"""File digests: the one SHA-256 of a file the package computes (downloads, stores, exports)."""

from __future__ import annotations

import hashlib
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
