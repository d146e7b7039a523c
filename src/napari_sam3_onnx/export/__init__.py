"""Export Meta's SAM 3 (PyPI ``sam3``) to this plugin's own ONNX bundle layout ``nso-sam3``.

This package imports PyTorch and ``sam3``; it lives in its own environment (the ``export``
extra) and nothing in the plugin's run-time packages (``engine``, ``models``, ``_napari``,
``cli``) may import it (an import-linter contract holds this). See ``docs/export.md``.

Modules:

* :mod:`.torch_env` - the CPU-host shims and the export-time patches, each explained;
* :mod:`.build` - Meta's image + tracker model from ``sam3.model_builder``, from a checkpoint or
  with seeded random weights at reduced depth;
* :mod:`.graphs` - the ``torch.nn.Module`` wrappers that become the bundle's graphs;
* :mod:`.writer` - ``torch.onnx.export`` of every graph, constants, manifest, licence;
* :mod:`.reference` - the PyTorch reference paths the parity checks compare against.
"""

LAYOUT = "nso-sam3"
LAYOUT_VERSION = 1
