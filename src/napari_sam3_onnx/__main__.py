"""``python -m napari_sam3_onnx``: open napari with the sample stack and the widget docked."""

import sys

from ._napari.launch import main

if __name__ == "__main__":
    sys.exit(main())
