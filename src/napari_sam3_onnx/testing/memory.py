"""Re-export of :mod:`napari_sam3_onnx.toy.memory`, kept for the tests' imports.

That module (the toy memory graphs) moved to the toy package because the shipped toy model is
built from it, and production code may import the toy but never this package.
"""

from ..toy.memory import *  # noqa: F403
