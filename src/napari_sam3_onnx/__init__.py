"""napari-sam3-onnx: Segment Anything 3 in napari through ONNX Runtime, no PyTorch at run time."""

__version__ = "0.1.0.dev0"
