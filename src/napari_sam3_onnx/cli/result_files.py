"""Result files for the command line: the ``--out`` name check and CSV tables.

Labels files are written by :mod:`napari_sam3_onnx.api.labels_files` (the series and the dock
use the same writer).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..api.io import InputError
from ..api.labels_files import is_labels_name
from .atomic import atomic_output


def check_labels_path(path: Path) -> Path:
    """Refuse an output name whose format is unknown (the folder is checked by :mod:`.guard`).

    ``IMAGE/labels/NAME`` inside an OME-Zarr image is a name too (NGFF labels of that image).
    """
    if not is_labels_name(path):
        raise InputError(f"--out {path}: use a .tif, .npy, .zarr or .ome.zarr name for the "
                         "labels (or IMAGE.ome.zarr/labels/NAME to add them to an OME-Zarr "
                         "image).")
    return path


def write_table(path: Path, columns: Sequence[str], rows: Iterable[dict],
                replace: bool = True) -> Path:
    """Write rows as CSV with ``columns`` in order (written to a temporary name, then renamed).

    ``replace``: ``--overwrite``, an existing ``path`` may be replaced (else the table takes
    the name only if it is still free when written, see
    :func:`~napari_sam3_onnx.api.labels_files.write_labels`).
    """
    with atomic_output(path, replace=replace) as tmp, \
            open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path
