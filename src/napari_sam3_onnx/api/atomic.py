"""Atomic outputs for the workflows: the writer is :mod:`napari_sam3_onnx.models.atomic`.

It moved to ``models`` so that every layer (the store, downloads, the exporter) uses the one
copy; these names stay importable from here. :func:`atomic_output` adds what only this layer
knows: a zarr folder output waits for zarr's background writes before its temporary is removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..models import atomic as _writer
from ..models.atomic import (
    OutputTakenError,
    keep_new,
    new_sibling,
    place_new,
    remove_ours,
    replace_into,
)

__all__ = ["OutputTakenError", "atomic_output", "keep_new", "new_sibling", "place_new",
           "remove_ours", "replace_into"]


def _settle_zarr() -> None:
    from ..engine.store.files import settle_io

    settle_io()


@contextmanager
def atomic_output(path: Path, directory: bool = False, replace: bool = True) -> Iterator[Path]:
    """:func:`napari_sam3_onnx.models.atomic.atomic_output` for the workflows' outputs.

    A folder output (a zarr array) may still have zarr's writes running after an interrupt:
    they are waited for before the temporary folder is removed, so they cannot recreate it.
    """
    settle = _settle_zarr if directory else None
    with _writer.atomic_output(path, directory, replace, settle=settle) as tmp:
        yield tmp
