"""Result files for the command line (labels stacks, CSV tables)."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..api.io import InputError

LABEL_SUFFIXES = (".tif", ".tiff", ".npy", ".zarr")


def check_labels_path(path: Path) -> Path:
    """Refuse an output name whose format is unknown, or whose folder is missing."""
    if not path.name.lower().endswith(LABEL_SUFFIXES):
        raise InputError(f"--out {path}: use a .tif, .npy or .zarr name for the labels.")
    if not path.parent.is_dir():
        raise InputError(f"--out {path}: the folder {path.parent} does not exist.")
    return path


def _tile(rows: int, cols: int) -> tuple[int, int]:
    return min(256, -(-rows // 16) * 16), min(256, -(-cols // 16) * 16)


def write_labels(path: Path, shape: Sequence[int], planes: Iterable[np.ndarray]) -> Path:
    """Write int32 label planes (C order over the leading axes) to a new file, then rename.

    Parameters
    ----------
    path : Path
        ``.tif``/``.tiff`` (zlib-compressed tiles), ``.npy`` or ``.zarr``.
    shape : sequence of int
        ``(..., rows, cols)`` of the whole labels array.
    planes : iterable of numpy.ndarray
        ``(rows, cols)`` planes; only one is held at a time. The file appears under its name
        only when complete (an interrupted run leaves no half-written labels).
    """
    shape = tuple(int(s) for s in shape)
    name = path.name.lower()
    tmp = path.with_name(path.name + ".partial")
    try:
        _write(tmp, name, shape, planes)
    except BaseException:  # Ctrl+C or an error mid-way: leave nothing half-written behind
        _remove(tmp)
        raise
    if path.is_dir():
        _remove(path)
    os.replace(tmp, path)
    return path


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


def _write(tmp: Path, name: str, shape: tuple[int, ...], planes: Iterable[np.ndarray]) -> None:
    lead = list(np.ndindex(*shape[:-2]))
    if name.endswith((".tif", ".tiff")):
        import tifffile

        tifffile.imwrite(tmp, (np.asarray(p, np.int32) for p in planes), shape=shape,
                         dtype=np.int32, compression="zlib", tile=_tile(*shape[-2:]),
                         photometric="minisblack")
    elif name.endswith(".npy"):
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.int32, shape=shape)
        for index, plane in zip(lead, planes, strict=True):
            out[index] = plane
        out.flush()
        del out
    else:
        import zarr

        _remove(tmp)
        out = zarr.create_array(str(tmp), shape=shape, dtype="int32",
                                chunks=(*([1] * (len(shape) - 2)), *shape[-2:]))
        for index, plane in zip(lead, planes, strict=True):
            out[index] = plane


def write_table(path: Path, columns: Sequence[str], rows: Iterable[dict]) -> Path:
    """Write rows as CSV with ``columns`` in order (written to a temporary name, then renamed)."""
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)
    return path
