"""The import contracts hold at run time too, not only for import-linter's static graph."""

import subprocess
import sys

# Importing the plugin's headless layers (and the command line) must not load the toy graphs:
# the toy is a registry entry whose builder module is imported only when the toy is built.
_CHECK = """
import sys
import napari_sam3_onnx.api, napari_sam3_onnx.cli
import napari_sam3_onnx.engine, napari_sam3_onnx.models
from napari_sam3_onnx.models.registry import get_bundle
spec = get_bundle("toy")
banned = ("napari_sam3_onnx.testing", "napari_sam3_onnx.export")
loaded = sorted(m for m in sys.modules if m.startswith(banned))
print(repr(spec.builder))
print(",".join(loaded) or "-")
"""


def test_production_imports_load_neither_testing_nor_export():
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "'napari_sam3_onnx.testing.toy_bundle'"  # found through the registry
    assert out[1] == "-"

