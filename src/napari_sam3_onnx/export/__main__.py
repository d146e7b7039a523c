"""``python -m napari_sam3_onnx.export`` (see :mod:`napari_sam3_onnx.export.writer`)."""

from .writer import main

if __name__ == "__main__":
    raise SystemExit(main())
