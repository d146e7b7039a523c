"""A bundle's identity by content: one digest of its graph and weight files.

Embedding-store entries are tied to this digest, so two bundles whose files have the same names
and sizes but other bytes (a re-export, other weights) never read each other's embeddings, while
a copy of the same files under another folder name does.

Hashing a full bundle (about 3 GB) takes seconds, so each file's SHA-256 is computed once and
remembered in a small JSON file, keyed by the file's size and modification time (``mtime_ns``):
beside the files (``<bundle>/.napari-sam3-onnx-digests.json``), or in the plugin's data folder
when the bundle folder is read-only. A bundle whose ``manifest.json`` records the SHA-256 of a
file (nso-sam3 exports) is not hashed for that file at all; the recorded value is used when the
recorded size matches the file's and the file is not newer than the manifest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path

from napari_sam3_onnx.models.atomic import write_atomically
from napari_sam3_onnx.models.hashing import sha256_file
from napari_sam3_onnx.models.registry import home_dir

#: Files that decide what the graphs compute (graphs, external weights, constants).
WEIGHT_FILE = re.compile(r".*(\.onnx|\.onnx[._]data|\.data|\.bin|\.npz)$")
CACHE_NAME = ".napari-sam3-onnx-digests.json"
_CACHE_VERSION = 1


def weight_files(folder: Path) -> list[Path]:
    """The bundle's graph and weight files, sorted by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and WEIGHT_FILE.match(p.name))


def _manifest_hashes(folder: Path) -> tuple[dict[str, tuple[int, str]], int]:
    """``name -> (bytes, sha256)`` recorded in ``manifest.json``, and its ``mtime_ns``.

    Empty (and 0) if there is no readable manifest with hashes.
    """
    path = folder / "manifest.json"
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        recorded = {str(n): (int(v["bytes"]), str(v["sha256"]).lower())
                    for n, v in files.items() if isinstance(v, dict)
                    and re.fullmatch(r"[0-9a-fA-F]{64}", str(v.get("sha256")))}
        return recorded, path.stat().st_mtime_ns
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, 0


def _cache_paths(folder: Path) -> list[Path]:
    """Where the digest cache may live: beside the files, then the plugin's data folder."""
    key = hashlib.blake2b(str(folder.resolve()).encode(), digest_size=8).hexdigest()
    return [folder / CACHE_NAME, home_dir() / "digests" / f"{folder.name}-{key}.json"]


def _read_cache(paths: list[Path]) -> dict[str, dict]:
    for path in paths:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == _CACHE_VERSION:
                return {str(k): v for k, v in data.get("files", {}).items() if isinstance(v, dict)}
    return {}


def _write_cache(paths: list[Path], files: dict[str, dict]) -> None:
    """Write the cache atomically to the first place that accepts it (none: not cached)."""
    text = json.dumps({"version": _CACHE_VERSION, "files": files}, indent=1, sort_keys=True)
    for path in paths:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text.encode("utf-8"))
            return
        except OSError:
            continue


def file_hashes(folder: Path | str) -> dict[str, str]:
    """``name -> sha256`` of the bundle's weight files, hashing only what no record covers.

    A file is hashed again when its size or ``mtime_ns`` differ from the cached ones. A
    manifest's record is used for a file of the recorded size that is not newer than the
    manifest (a file replaced after the export is hashed).
    """
    folder = Path(folder)
    recorded, manifest_mtime = _manifest_hashes(folder)
    paths = _cache_paths(folder)
    cache = _read_cache(paths)
    out: dict[str, str] = {}
    changed = False
    for path in weight_files(folder):
        st = path.stat()
        rec = recorded.get(path.name)
        if rec is not None and rec[0] == st.st_size and st.st_mtime_ns <= manifest_mtime:
            out[path.name] = rec[1]
            continue
        hit = cache.get(path.name)
        if hit and hit.get("size") == st.st_size and hit.get("mtime_ns") == st.st_mtime_ns:
            out[path.name] = str(hit["sha256"])
            continue
        out[path.name] = sha256_file(path)
        cache[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns,
                            "sha256": out[path.name]}
        changed = True
    if changed:
        _write_cache(paths, {n: v for n, v in cache.items() if n in out})
    return out


def bundle_digest(folder: Path | str) -> str:
    """One digest of the names and contents of the bundle's weight files.

    Returns
    -------
    str
        ``"sha256:<hex>"`` over ``name:sha256;`` of every file in name order; equal for two
        folders exactly when they hold the same files with the same bytes.
    """
    digest = hashlib.sha256()
    for name, value in sorted(file_hashes(folder).items()):
        digest.update(f"{name}:{value};".encode())
    return "sha256:" + digest.hexdigest()
