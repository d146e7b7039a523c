"""A bundle's ``manifest.json``, file digests and atomic writes (torch-free).

Used by the writer and the precision variants.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

MANIFEST = "manifest.json"


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomically(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a new temporary file beside it, renamed into place.

    An interrupted run leaves what was at ``path`` before (or nothing), never half a file; the
    temporary name is created exclusively, so no file of the user's is touched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fout:
            fout.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
