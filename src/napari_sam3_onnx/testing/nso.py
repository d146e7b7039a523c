"""Re-export of :mod:`napari_sam3_onnx.toy.nso`, kept for the tests' imports.

That module (the nso-sam3 toy layout) moved to the toy package because the shipped toy model is
built from it, and production code may import the toy but never this package.
"""

from ..toy.nso import *  # noqa: F403
