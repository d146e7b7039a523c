"""The toy model the plugin ships (``fetch toy``, ``--test-bundle``): tiny hand-written ONNX graphs.

:mod:`.bundle` builds it (every workflow, no weights, not SAM 3) from the graph builder
(:mod:`.builder`), the test geometry (:mod:`.geometry`), the toy semantics (:mod:`.semantics`,
:mod:`.concepts`, :mod:`.memory`), the ``nso-sam3`` layout (:mod:`.nso`), the toy tokenizer
(:mod:`.tokenizer`) and its blob graphs (:mod:`.blobs`, :mod:`.head`). It is production code:
the workflows (:mod:`napari_sam3_onnx.api`) import it when the toy is built, and the test
bundles of the other layouts (:mod:`napari_sam3_onnx.testing`) are built on the same pieces.
It needs the ``onnx`` package (``pip install 'napari-sam3-onnx[toy]'``) and sits below the
workflows and the test bundles: it imports the engine and the models only.
"""
