"""Re-export of :mod:`napari_sam3_onnx.toy.concepts`, kept for the tests' imports.

That module (the toy concept semantics) moved to the toy package because the shipped toy model
is built from it, and production code may import the toy but never this package.
"""

from ..toy.concepts import *  # noqa: F403
