"""The import contracts hold at run time too, not only for import-linter's static graph."""

import subprocess
import sys

# Importing the plugin's headless layers (and the command line) must load neither the test
# bundles nor the exporter, nor the toy model's graphs (they need onnx): the toy is built, by
# production code in napari_sam3_onnx.toy, only when it is asked for.
_CHECK = """
import sys
import napari_sam3_onnx.api, napari_sam3_onnx.cli
import napari_sam3_onnx.engine, napari_sam3_onnx.models
ours = ("napari_sam3_onnx.testing", "napari_sam3_onnx.export", "napari_sam3_onnx.toy")
print(",".join(sorted(m for m in sys.modules
                      if m.startswith(ours) or m.split(".")[0] == "onnx")) or "-")
"""


def test_production_imports_load_neither_testing_nor_export_nor_the_toy():
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "-"


# Building the toy (fetch toy, --test-bundle) runs production code only: no test module loads.
_BUILD = """
import sys
from napari_sam3_onnx.api.bundle_fetch import fetch_bundle
from napari_sam3_onnx.models.registry import get_bundle
folder = fetch_bundle(get_bundle("toy"), sys.argv[1])
print(sum(p.suffix == ".onnx" for p in folder.iterdir()))
print(",".join(sorted(m for m in sys.modules if m.startswith("napari_sam3_onnx.testing"))) or "-")
"""


def test_building_the_toy_loads_no_test_module(tmp_path):
    out = subprocess.run([sys.executable, "-c", _BUILD, str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert int(out[0]) >= 5  # the toy's graphs were built
    assert out[1] == "-"


_NO_ONNX = """
import sys
sys.modules["onnx"] = None  # as if the 'onnx' package were not installed
from napari_sam3_onnx.api.bundle_fetch import build_here
from napari_sam3_onnx.models.errors import Sam3OnnxError
from napari_sam3_onnx.models.registry import get_bundle
try:
    build_here(get_bundle("toy"), root=sys.argv[1])
except Sam3OnnxError as exc:
    print(exc)
"""


def test_the_toy_without_onnx_says_what_to_install(tmp_path):
    out = subprocess.run([sys.executable, "-c", _NO_ONNX, str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout
    assert "built with the 'onnx' package, which is not installed" in out
    assert "pip install 'napari-sam3-onnx[toy]'" in out
    assert not any(tmp_path.iterdir())  # nothing half-built left behind


# Small modules: the dock and the engine are grouped into sub-packages so that no file has to
# grow into a mixed bag; this holds the line (``wc -l`` counts) where it stands.
MAX_MODULE_LINES = 400


def test_no_module_of_the_dock_or_the_engine_exceeds_400_lines():
    from pathlib import Path

    import napari_sam3_onnx

    root = Path(napari_sam3_onnx.__file__).parent
    for package in ("_napari", "engine"):
        modules = sorted((root / package).rglob("*.py"))
        assert len(modules) > 10, f"{package}/ not found under {root}"  # the check is not empty
        sizes = {m.relative_to(root).as_posix(): len(m.read_bytes().splitlines())
                 for m in modules}
        too_long = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
        assert not too_long, f"split these modules (over {MAX_MODULE_LINES} lines): {too_long}"
