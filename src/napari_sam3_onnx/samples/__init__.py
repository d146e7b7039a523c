"""Sample data the plugin ships, generated here (numpy only, no download, no model).

:mod:`.synthetic` is the deterministic synthetic nuclei z-stack behind napari's
"Synthetic nuclei" sample, the toy model's test scene and the docs' examples. Real microscopy
with ground truth, read from other packages' files, is :mod:`napari_sam3_onnx.api.samples`.
This package sits below every other layer: anything may import it.
"""
