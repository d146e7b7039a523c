"""A bundle's identity by content: one digest of every file its adapter may read.

Embedding-store entries are tied to this digest, so two bundles whose files have the same names
and sizes but other bytes (a re-export, other weights, another normalisation in
``constants.json``, another tokenizer) never read each other's embeddings, while a copy of the
same files under another folder name does. Every file at the top of the folder counts, whatever
its name (external data may be called anything the graph says, e.g. ``*.weights``), except
names starting with ``.`` (this module's cache, download records) and documentation no adapter
reads (``README*``, ``LICENSE*``, ``NOTICE*``, ``*.md``).

Hashing a full bundle (about 3 GB) takes seconds, so each file's SHA-256 is computed once and
remembered in a small JSON file, keyed by what no user-space tool can set back: the file's size,
modification time, status-change time (``st_ctime_ns``, which ``touch -r`` or ``os.utime``
cannot restore: the kernel sets it on every change), inode and device. The cache lives beside
the files (``<bundle>/.napari-sam3-onnx-digests.json``), or in the plugin's data folder when the
bundle folder is read-only. A SHA-256 written in ``manifest.json`` is never taken instead of
the file's own: the file may have changed after the manifest was written.
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

#: Files no adapter reads: left out of the identity (a note added to a bundle changes nothing).
NOT_READ = re.compile(r"(\..*|(readme|licen[cs]e|notice)(\..*)?|.*\.md)", re.IGNORECASE)
CACHE_NAME = ".napari-sam3-onnx-digests.json"
_CACHE_VERSION = 2


def weight_files(folder: Path) -> list[Path]:
    """Every file of the bundle an adapter may read (graphs, weights, constants, tokenizer...).

    Sorted by name; links are followed (a downloaded bundle links into the Hugging Face cache).
    """
    return sorted(p for p in folder.iterdir() if p.is_file() and not NOT_READ.fullmatch(p.name))




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


def _stamp(path: Path) -> dict[str, int]:
    """What changes whenever the file's bytes do (ctime included: no tool can set it back)."""
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino, "device": st.st_dev}


def file_hashes(folder: Path | str) -> dict[str, str]:
    """``name -> sha256`` of the bundle's files (:func:`weight_files`), hashing what changed.

    A file is hashed again unless its size, ``mtime_ns``, ``ctime_ns``, inode and device all
    equal the cached ones.
    """
    folder = Path(folder)
    paths = _cache_paths(folder)
    cache = _read_cache(paths)
    out: dict[str, str] = {}
    changed = False
    for path in weight_files(folder):
        stamp = _stamp(path)
        hit = cache.get(path.name)
        if hit and all(hit.get(k) == v for k, v in stamp.items()) and hit.get("sha256"):
            out[path.name] = str(hit["sha256"])
            continue
        out[path.name] = sha256_file(path)
        cache[path.name] = {**stamp, "sha256": out[path.name]}
        changed = True
    if changed:
        _write_cache(paths, {n: v for n, v in cache.items() if n in out})
    return out


def bundle_digest(folder: Path | str) -> str:
    """One digest of the names and contents of the bundle's files (:func:`weight_files`).

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
