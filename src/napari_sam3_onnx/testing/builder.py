"""Re-export of :mod:`napari_sam3_onnx.toy.builder`, kept for the tests' imports.

That module (the ONNX graph builder) moved to the toy package because the shipped toy model is
built from it, and production code may import the toy but never this package.
"""

from ..toy.builder import *  # noqa: F403
