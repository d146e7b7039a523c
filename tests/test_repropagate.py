"""Re-propagating label ids already in a labels stack: only those ids change, where reached."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import disc
from napari_sam3_onnx import api
from napari_sam3_onnx.models.errors import PromptError

N, SHAPE = 6, (50, 80)


def blob(z):
    return disc(SHAPE, 25, 20 + 3 * z, 6)  # moves right by 3 px a slice


def scene():
    image = np.zeros((N, *SHAPE), np.uint8)
    for z in range(N):
        image[z][blob(z)] = 200
    labels = np.zeros((N, *SHAPE), np.uint16)
    labels[2][blob(2)] = 3  # the seed: right on slice 2
    labels[0][5:10, 5:10] = 3  # an old, wrong id 3 before the seed: kept going forward
    labels[4][40:46, 60:70] = 3  # an old, wrong id 3 after it: replaced
    labels[4][blob(4) & (np.arange(SHAPE[1])[None, :] > 20 + 3 * 4 + 2)] = 8  # a neighbour
    labels[5][2:6, 2:6] = 1
    return image, labels


def iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def test_forward_replaces_only_that_id_from_the_seed_on(hf_bundle):
    image, labels = scene()
    before = labels.copy()
    bundle = api.open_bundle(hf_bundle)
    out, result = api.repropagate(bundle, image, labels, 2, [3], direction="forward")
    fresh, _ = api.propagate(bundle, image, {3: [api.Seed.from_mask(2, labels[2] == 3)]},
                             direction="forward")
    assert out.dtype == labels.dtype
    np.testing.assert_array_equal(labels, before)  # the input is not written
    np.testing.assert_array_equal(out[:2], before[:2])  # slices before the seed are kept
    for z in range(2, N):
        want = blob(z) & (before[z] != 8)
        assert iou(out[z] == 3, want) > 0.7, z
        # what a fresh propagation of the seed gives, where no other id is
        np.testing.assert_array_equal(out[z] == 3, (fresh[z] == 3) & ~np.isin(before[z], (1, 8)))
    assert not (out[4][40:46, 60:70] == 3).any()  # the old wrong pixels are gone
    for other in (1, 8):
        np.testing.assert_array_equal(out == other, before == other)
    assert set(result.objects) == {3}


def test_an_id_that_is_not_on_the_slice_is_refused(hf_bundle):
    image, labels = scene()
    with pytest.raises(PromptError, match="not on this slice"):
        api.repropagate(api.open_bundle(hf_bundle), image, labels, 2, [8])
    with pytest.raises(api.InputError, match="shape"):
        api.repropagate(api.open_bundle(hf_bundle), image, labels[:, :10], 2, [3])


def test_cli_repropagate_writes_a_new_file_with_only_that_id_changed(hf_bundle, tmp_path, capsys):
    import tifffile

    from napari_sam3_onnx.cli import main

    image, labels = scene()
    tifffile.imwrite(tmp_path / "img.tif", image, photometric="minisblack")
    tifffile.imwrite(tmp_path / "lab.tif", labels, photometric="minisblack")
    argv = ["propagate", str(hf_bundle), str(tmp_path / "img.tif"), "--repropagate",
            "--seed-labels", str(tmp_path / "lab.tif"), "--seed-slice", "2", "--ids", "3",
            "--direction", "forward", "--out", str(tmp_path / "new.tif")]
    assert main(argv) == 0
    assert "re-propagation of label(s) 3 from slice 2" in capsys.readouterr().out
    want, _ = api.repropagate(api.open_bundle(hf_bundle), image, labels, 2, [3],
                              direction="forward")
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "new.tif"), want)
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "lab.tif"), labels)  # kept
    same = [*argv[:-1], str(tmp_path / "lab.tif")]  # --out onto the labels: refused first
    assert main(same) == 2
    assert "is the seed labels" in capsys.readouterr().err
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "lab.tif"), labels)
    no_slice = [a for a in argv[:-1] if a not in ("--seed-slice", "2")]
    assert main([*no_slice, str(tmp_path / "other.tif")]) == 2
    assert "--seed-slice" in capsys.readouterr().err
    assert not (tmp_path / "other.tif").exists()
