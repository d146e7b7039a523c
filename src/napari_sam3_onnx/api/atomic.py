"""Atomic outputs for the workflows: the writer is :mod:`napari_sam3_onnx.models.atomic`.

It moved to ``models`` so that every layer (the store, downloads, the exporter) uses the one
copy; these names stay importable from here.
"""

from ..models.atomic import (
    OutputTakenError,
    atomic_output,
    keep_new,
    new_sibling,
    place_new,
    remove_ours,
    replace_into,
)

__all__ = ["OutputTakenError", "atomic_output", "keep_new", "new_sibling", "place_new",
           "remove_ours", "replace_into"]
