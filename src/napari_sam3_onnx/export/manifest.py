"""A bundle's ``manifest.json``, file digests and atomic writes (torch-free).

Used by the writer and the precision variants.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..models.atomic import write_atomically
from ..models.hashing import sha256_file

MANIFEST = "manifest.json"
__all__ = ["MANIFEST", "read_manifest", "sha256", "write_atomically", "write_manifest"]


#: Hex SHA-256 of a file (the package's one copy).
sha256 = sha256_file


def read_manifest(folder: Path | str) -> dict:
    """The parsed ``manifest.json`` of a bundle folder."""
    return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))


def write_manifest(folder: Path | str, manifest: dict, *, rehash: bool = True) -> None:
    """Write ``manifest`` into ``folder``; ``rehash``: first re-measure every listed file."""
    folder = Path(folder)
    if rehash:
        manifest["files"] = {n: {"sha256": sha256(folder / n),
                                 "bytes": (folder / n).stat().st_size}
                             for n in manifest["files"]}
    write_atomically(folder / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())
