"""Atomic outputs: the machinery is :mod:`napari_sam3_onnx.api.atomic` (the widget uses it too)."""

from ..api.atomic import atomic_output, new_sibling, remove_ours, replace_into

__all__ = ["atomic_output", "new_sibling", "remove_ours", "replace_into"]
