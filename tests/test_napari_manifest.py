"""The npe2 manifest: one real file in the package, an identical copy at the top level."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ROOT / "src" / "napari_sam3_onnx" / "napari.yaml"
TOP = ROOT / "napari.yaml"


def test_top_level_manifest_is_an_identical_copy():
    assert TOP.read_bytes() == PACKAGED.read_bytes(), (
        "napari.yaml at the top level must be a copy of src/napari_sam3_onnx/napari.yaml: "
        "cp src/napari_sam3_onnx/napari.yaml napari.yaml"
    )


def test_manifest_validates_and_imports():
    npe2 = pytest.importorskip("npe2")
    manifest = npe2.PluginManifest.from_file(PACKAGED)
    manifest.validate_imports()
    assert manifest.name == "napari-sam3-onnx"
    assert manifest.display_name == "SAM 3"
    # one menu entry per workflow (each opens the one dock on its tab)
    assert [w.display_name for w in manifest.contributions.widgets] == [
        "SAM 3", "Text search", "Propagate", "Automatic segmentation"]
    titles = {c.id: c.title for c in manifest.contributions.commands}
    assert all("(SAM 3)" in titles[w.command] for w in manifest.contributions.widgets)
    samples = {s.key: s.display_name for s in manifest.contributions.sample_data}
    assert samples["synthetic_nuclei"] == "Synthetic nuclei (uint16 z-stack)"


def test_sample_is_deterministic_non_square_uint16():
    from napari_sam3_onnx._napari.sample_data import synthetic_nuclei_sample

    (a, meta, kind), = synthetic_nuclei_sample()
    (b, _, _), = synthetic_nuclei_sample()
    assert kind == "image" and a.dtype == np.uint16 and a.shape == (12, 180, 240)
    np.testing.assert_array_equal(a, b)
    lo, hi = meta["contrast_limits"]
    assert a.min() <= lo < hi <= a.max()
