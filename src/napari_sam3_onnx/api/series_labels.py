"""The labels file of one image of a series: write it atomically, digest it, read it back.

One 2-D labels plane per image, in the format the user chose for the series
(:data:`FORMATS`): an OME-TIFF (zlib-compressed, the provenance record in its OME
``Description``), a ``.npy`` (the record in its sidecar) or an OME-Zarr labels image (the record
in its attributes). Every write goes to a temporary sibling renamed into place when complete
(:mod:`.atomic`); where replacing was not granted the name must still be free at that moment.

:func:`file_digest` is what the series state records of a saved file (SHA-256 and size), so a
file changed or removed since is not taken for the one saved.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from .atomic import (
    OutputTakenError,
    atomic_output,
    keep_new,
    new_sibling,
    remove_ours,
    replace_into,
)
from .ngff import write_ngff_labels
from .provenance import ATTR, Provenance, sidecar

#: Format name -> file name ending of the labels files.
FORMATS = {"tif": ".tif", "npy": ".npy", "ome.zarr": ".ome.zarr"}


def format_of(path: Path) -> str:
    """The :data:`FORMATS` name of a labels file name (ValueError for another ending)."""
    name = Path(path).name.lower()
    for fmt, suffix in sorted(FORMATS.items(), key=lambda kv: -len(kv[1])):
        if name.endswith(suffix):
            return fmt
    if name.endswith(".tiff"):
        return "tif"
    raise ValueError(f"{path}: not a {', '.join(FORMATS.values())} labels file name")


def write_plane_labels(path: Path, labels: np.ndarray, replace: bool = False,
                       provenance: Provenance | None = None) -> Path:
    """Write one ``(rows, cols)`` labels plane as int32 to ``path`` (format from its ending).

    Parameters
    ----------
    path : Path
        ``.tif``, ``.npy`` or ``.ome.zarr``.
    labels : numpy.ndarray
        ``(rows, cols)`` integer labels (0: background).
    replace : bool
        An existing ``path`` may be replaced (the user confirmed). If False, the finished file
        takes the name only if it is still free, else :class:`~.atomic.OutputTakenError`.
    provenance : Provenance, optional
        What made the labels, kept with them (see the module notes).
    """
    path = Path(path)
    plane = np.asarray(labels)
    if plane.ndim != 2 or not np.issubdtype(plane.dtype, np.integer):
        raise ValueError(f"expected (rows, cols) integer labels, got {plane.dtype} "
                         f"{plane.shape}")
    plane = plane.astype(np.int32, copy=False)
    fmt = format_of(path)
    if fmt == "ome.zarr":
        attrs = None if provenance is None else {ATTR: provenance.to_dict()}
        return write_ngff_labels(path, plane.shape, [plane], axes="yx", replace=replace,
                                 attributes=attrs)
    if fmt == "tif":
        import tifffile

        meta: dict = {"axes": "YX"}
        if provenance is not None:
            meta["Description"] = provenance.to_json()
        with atomic_output(path, replace=replace) as tmp:
            tifffile.imwrite(tmp, plane, compression="zlib", photometric="minisblack",
                             ome=True, metadata=meta)
        return path
    side = new_sibling(sidecar(path)) if provenance is not None else None
    try:
        with atomic_output(path, replace=replace) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, plane, allow_pickle=False)
            if side is not None and provenance is not None:
                side.write_text(provenance.to_json(), encoding="utf-8")
        if side is not None:
            _place(side, sidecar(path), replace)
            side = None
    finally:
        if side is not None:
            remove_ours(side)
    return path


def _place(tmp: Path, target: Path, replace: bool) -> None:
    if replace:
        replace_into(tmp, target)
        return
    kept = keep_new(tmp, target)
    if kept != target:
        raise OutputTakenError(target, kept)


def file_digest(path: Path) -> tuple[str, int]:
    """``(sha256 hex, size in bytes)`` of a file, or of a folder's files (an OME-Zarr).

    A folder's digest covers each file's path relative to it and its bytes, in sorted order.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    if path.is_file():
        return _hash_files(path, [path])
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return _hash_files(path, files)


def _hash_files(root: Path, files: list[Path]) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    for f in files:
        if f != root:
            digest.update(os.fsencode(f.relative_to(root).as_posix()) + b"\0")
        with open(f, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
                size += len(block)
    return digest.hexdigest(), size


def read_plane_labels(path: Path) -> np.ndarray:
    """A labels file written by :func:`write_plane_labels` as an int32 ``(rows, cols)`` array."""
    from .io import read_image

    data = np.asarray(read_image(path))
    while data.ndim > 2 and data.shape[0] == 1:
        data = data[0]
    if data.ndim != 2:
        raise ValueError(f"{path}: labels of shape {data.shape}, not one plane")
    return data.astype(np.int32, copy=False)
