"""Exemplars from labels: SAM 3's exemplar search per plane, carried and linked through z."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.api.exemplars import exemplars_from_labels
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.toy import bundle as toy_bundle

N, R, C = 6, 96, 128  # z, rows, cols: all different
BRIGHT = [(20, 20), (30, 90), (70, 50)]  # cells: move right 2 px a plane
DIM = [(75, 110), (50, 15)]  # debris: dimmer, move left


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return api.open_bundle(toy_bundle.build(tmp_path_factory.mktemp("toy") / "toy"))


def scene():
    rr, cc = np.mgrid[:R, :C]
    image = np.zeros((N, R, C), np.uint8)
    truth = np.zeros((N, R, C), np.int32)
    for z in range(N):
        for k, (r, c) in enumerate(BRIGHT, 1):
            disc = (rr - r) ** 2 + (cc - c - 2 * z) ** 2 <= 49
            image[z][disc], truth[z][disc] = 220, k
        for r, c in DIM:
            image[z][(rr - r) ** 2 + (cc - c + z) ** 2 <= 49] = 90
    return image, truth


def objects_match(labels, truth):
    """Each true cell holds one id through the whole stack, a different id per cell."""
    ids = []
    for k in range(1, len(BRIGHT) + 1):
        got = set(np.unique(labels[truth == k])) - {0}
        if len(got) != 1:
            return False
        ids.append(got.pop())
    return len(set(ids)) == len(ids)


def test_boxes_per_plane_positive_and_negative():
    lab = np.zeros((3, 10, 12), np.int32)
    lab[1, 2:4, 3:6], lab[1, 6:9, 1:2], lab[2, 0:2, 0:2] = 4, 9, 9
    ex, notes = exemplars_from_labels(lab, [4], others_negative=True)
    assert list(ex) == [1] and not notes
    assert ex[1].positive.tolist() == [True, False]
    assert ex[1].boxes_rc.tolist() == [[1.5, 2.5, 3.5, 5.5], [5.5, 0.5, 8.5, 1.5]]
    ex, notes = exemplars_from_labels(lab, None, max_per_plane=1)
    assert sorted(ex) == [1, 2] and "plane 1: 2 exemplars" in notes[0]
    with pytest.raises(PromptError, match="No positive exemplar"):
        exemplars_from_labels(lab, [5])
    with pytest.raises(PromptError, match="both positive and negative"):
        exemplars_from_labels(lab, [4], [4])


def test_one_labelled_cell_finds_the_others_on_its_plane_only(toy):
    image, truth = scene()
    lab = np.where((truth == 1) & (np.arange(N)[:, None, None] == 2), 1, 0)
    res = api.search_like(toy, image, lab)
    assert res.planes == [2] and res.found == {2: 3} and res.method is None
    assert not res.labels[[0, 1, 3, 4, 5]].any()  # only the exemplar's plane is searched
    for k in range(1, 4):
        assert len(set(np.unique(res.labels[2][truth[2] == k])) - {0}) == 1
    assert not res.labels[2][(image[2] == 90)].any()  # the dim debris is not like it


def test_through_the_stack_one_id_per_object_linked_across_exemplar_planes(toy):
    image, truth = scene()
    lab = np.zeros_like(truth)
    lab[1][truth[1] == 1] = 1
    lab[4][truth[4] == 2] = 7  # a second exemplar, on another plane, of another cell
    res = api.search_like(toy, image, lab, through_stack=True)
    assert res.method == "memory" and res.found == {1: 3, 4: 3}
    assert res.objects == 3 and objects_match(res.labels, truth)
    for z in range(N):  # every cell on every plane, nothing on the debris
        for k in range(1, 4):
            m = truth[z] == k
            assert (res.labels[z][m] > 0).mean() > 0.95, (z, k)
        assert not res.labels[z][image[z] == 90].any()
    unlinked = api.search_like(toy, image, lab, through_stack=True, link_iou=1.01)
    assert unlinked.objects == 6  # without linking each exemplar plane's finds are new ids


def test_search_like_refuses_mismatched_labels(toy):
    image, truth = scene()
    with pytest.raises(api.InputError, match="shape"):
        api.search_like(toy, image, truth[:, :10])
    with pytest.raises(PromptError, match="needs a stack"):
        api.search_like(toy, image[0], truth[0], through_stack=True)


def test_cli_text_exemplars_from_labels_through_the_stack(toy, tmp_path, capsys):
    import tifffile

    from napari_sam3_onnx.cli import main

    image, truth = scene()
    lab = np.zeros_like(truth)
    lab[1][truth[1] == 1] = 1
    tifffile.imwrite(tmp_path / "img.tif", image, photometric="minisblack")
    tifffile.imwrite(tmp_path / "ex.tif", lab, photometric="minisblack")
    argv = ["text", str(toy.folder), str(tmp_path / "img.tif"), "--exemplars-from",
            str(tmp_path / "ex.tif"), "--through-stack", "--out", str(tmp_path / "out.tif"),
            "--table", str(tmp_path / "t.csv")]
    assert main(argv) == 0
    assert "3 object(s) like the exemplars on plane(s) 1, carried through z (memory)" in \
        capsys.readouterr().out
    out = tifffile.imread(tmp_path / "out.tif")
    want = api.search_like(toy, image, lab, through_stack=True).labels
    np.testing.assert_array_equal(out, want)
    assert objects_match(out, truth)
    assert len(open(tmp_path / "t.csv").read().splitlines()) == 1 + 3 * N
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "ex.tif"), lab)
    onto = [*argv[:-3], str(tmp_path / "ex.tif"), "--overwrite"]  # --out onto the exemplars
    assert main(onto) == 2 and "exemplar labels" in capsys.readouterr().err
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "ex.tif"), lab)
    assert main(["text", str(toy.folder), str(tmp_path / "img.tif"), "--out",
                 str(tmp_path / "none.tif")]) == 2
    assert "--exemplars-from" in capsys.readouterr().err


def test_quality_exemplar_mode_scores_the_other_instances_only(toy):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import quality

    image, truth = scene()
    flat_truth = truth[2].copy()  # the three cells
    rows = list(quality.exemplar_modes(toy, image[2], flat_truth, None, ks=(1,)))
    (mode, pred, rest, _, used), = rows
    assert mode == "exemplars k=1" and used == 1
    assert len(np.unique(rest)) - 1 == 2  # the exemplar cell is left out of the truth
    ev = api.evaluate(pred, rest).overall
    assert (ev.n_pred, ev.n_true, ev.at(0.5).tp) == (2, 2, 2)  # the others, not the exemplar
    ex, picked = quality.exemplar_labels(truth, 2)  # a stack: each on its largest plane only
    assert len(picked) == 2 and all(len(np.unique(np.nonzero(ex == i)[0])) == 1 for i in picked)


def test_crop_iou_matches_the_full_plane_iou():
    from napari_sam3_onnx.api.exemplars import _crop, _crop_iou

    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = np.zeros((2, 30, 41), bool)
        for m in (a, b):
            r, c = rng.integers(0, 25), rng.integers(0, 35)
            m[r:r + rng.integers(1, 12), c:c + rng.integers(1, 12)] = True
        want = (a & b).sum() / (a | b).sum()
        assert _crop_iou(_crop(a), _crop(b)) == pytest.approx(want)
