"""A bundle's ``manifest.json`` and file digests (torch-free: the writer and the variants)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "manifest.json"


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
