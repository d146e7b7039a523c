"""Re-export of :mod:`napari_sam3_onnx.toy.geometry`, kept for the tests' imports.

That module (the test geometry) moved to the toy package because the shipped toy model is built
from it, and production code may import the toy but never this package.
"""

from ..toy.geometry import *  # noqa: F403
