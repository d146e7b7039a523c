"""Atomic outputs for the workflows: the writer is :mod:`napari_sam3_onnx.models.atomic`.

It moved to ``models`` so that every layer (the store, downloads, the exporter) uses the one
copy; these names stay importable from here.
"""

from ..models.atomic import atomic_output, new_sibling, remove_ours, replace_into

__all__ = ["atomic_output", "new_sibling", "remove_ours", "replace_into"]
