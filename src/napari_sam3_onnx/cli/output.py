"""Terminal progress and result files for the command line (labels stacks, CSV tables)."""

from __future__ import annotations

import csv
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np

from ..api.io import InputError

LABEL_SUFFIXES = (".tif", ".tiff", ".npy", ".zarr")


class Bar:
    """A one-line progress bar, redrawn in place on a terminal; one line at the end elsewhere.

    Parameters
    ----------
    label : str
        What is counted (a file name, "encode").
    unit : {"", "B"}
        ``"B"`` shows byte counts as MB.
    stream : file, optional
        Default ``sys.stderr``.
    """

    def __init__(self, label: str, unit: str = "", stream: TextIO | None = None) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done, self.total = 0, None
        self._last = 0.0

    def _amount(self, n: int | None) -> str:
        if n is None:
            return "?"
        return f"{n / 1e6:.1f} MB" if self.unit == "B" else str(n)

    def line(self) -> str:
        """The bar as text, e.g. ``encode [#######.......]  50% 5/10``."""
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(28 * frac) + "." * (28 - int(28 * frac))
            return (f"{self.label} [{bar}] {100 * frac:5.1f}% "
                    f"{self._amount(self.done)}/{self._amount(self.total)}")
        return f"{self.label} {self._amount(self.done)}"

    def update(self, done: int, total: int | None = None) -> None:
        """Set the count (redrawn at most 10 times a second on a terminal)."""
        self.done, self.total = int(done), total if total is not None else self.total
        now = time.monotonic()
        if self.tty and (now - self._last > 0.1 or (self.total and self.done >= self.total)):
            self._last = now
            self.stream.write("\r" + self.line())
            self.stream.flush()

    def close(self) -> None:
        """End the line (on a terminal) or print the final state once (elsewhere)."""
        self.stream.write(("\r" if self.tty else "") + self.line() + "\n")
        self.stream.flush()


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
