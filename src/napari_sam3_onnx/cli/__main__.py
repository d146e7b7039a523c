"""``python -m napari_sam3_onnx.cli``: the command line (same as ``napari-sam3-onnx``)."""

import sys

from . import main

sys.exit(main())
