"""Refining a label that is already there: its box and mask as the prompt, clicks on top."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx import api
from napari_sam3_onnx.api.refine import NO_MASK_NOTE, mask_note, pick_label
from napari_sam3_onnx.engine.label_prompt import label_box, label_logits, replace_label
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.testing.nso import build_nso

SHAPE = (70, 110)  # rows != cols: the model input stretches the plane
CELL = (40, 70, 10)  # the object the label should cover (row, col, radius)


def cut_label(other_id: int = 2) -> np.ndarray:
    """A Cellpose-like labels plane: id 5 is the cell's left half only; id 2 another object."""
    lab = np.zeros(SHAPE, np.int32)
    cell = disc(SHAPE, *CELL[:2], CELL[2])
    lab[cell & (np.arange(SHAPE[1])[None, :] <= CELL[1])] = 5
    lab[disc(SHAPE, 15, 20, 6)] = other_id
    return lab


def iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def test_label_logits_are_plus_minus_ten_in_model_space():
    mask = np.zeros((30, 60), bool)
    mask[:, :30] = True  # the left half of a wide plane
    logits = label_logits(mask, (40, 40), (20, 20))
    assert logits.shape == (20, 20) and logits.dtype == np.float32
    assert np.allclose(logits[:, :9], 10) and np.allclose(logits[:, 11:], -10)
    assert label_box(mask).tolist() == [-0.5, -0.5, 29.5, 29.5]
    assert label_box(np.zeros((3, 4), bool)) is None


def test_replace_label_changes_only_that_id():
    plane = np.array([[5, 5, 0, 2], [0, 5, 2, 2]], np.int32)
    new = replace_label(plane, 5, np.array([[0, 1, 1, 1], [1, 0, 0, 1]], bool))
    assert new.tolist() == [[0, 5, 5, 2], [5, 0, 2, 2]]
    assert plane.tolist() == [[5, 5, 0, 2], [0, 5, 2, 2]]  # the input is kept


def test_one_click_on_the_missing_half_restores_the_label(hf_bundle):
    """The hf-tracker toy takes no mask prompt: the label's box and the click are used."""
    bundle = api.open_bundle(hf_bundle)
    assert mask_note(bundle.adapter) == NO_MASK_NOTE
    img = blob_image(SHAPE, blobs=((*CELL[:2], CELL[2]), (15, 20, 6)))
    cell = disc(SHAPE, *CELL[:2], CELL[2])
    labels = np.stack([np.zeros(SHAPE, np.int32), cut_label()])  # (z=2, rows, cols)
    before = labels.copy()
    alone, _ = api.refine(bundle, img[None].repeat(2, 0), labels, 5, index=(1,))
    assert iou(alone == 5, cell) < 0.7  # the box of the half gives the half back
    plane, answer = api.refine(bundle, img[None].repeat(2, 0), labels, 5,
                               [[CELL[0], CELL[1] + 6]], [1], index=(1,))
    # What this toy draws for the whole cell (its 20-cell mask grid is coarse): a box around it.
    whole = api.segment(bundle, img, box_rc=(29.5, 59.5, 50.5, 80.5)).mask
    assert iou(alone == 5, whole) < 0.6
    assert iou(answer.mask, whole) > 0.95 and iou(answer.mask, cell) > 0.85
    np.testing.assert_array_equal(plane == 5, answer.mask & (before[1] != 2))
    np.testing.assert_array_equal(plane == 2, before[1] == 2)  # the other id is untouched
    np.testing.assert_array_equal(labels, before)  # the caller's labels are not written


def test_the_mask_prompt_shapes_the_answer_where_the_decoder_takes_one(tmp_path):
    """nso toy: logits are capped at ``mask_input + 5``, so the label's outline is kept."""
    bundle = api.open_bundle(build_nso(tmp_path / "nso"))
    assert mask_note(bundle.adapter) == ""
    square = np.zeros(SHAPE, np.uint8)
    square[20:60, 40:100] = 200
    rr, cc = np.mgrid[:SHAPE[0], :SHAPE[1]]
    triangle = (square > 0) & ((rr - 20) * 60 > (cc - 40) * 40)  # below the diagonal
    labels = np.where(triangle, 3, 0).astype(np.int32)
    target = pick_label(bundle.adapter, labels, 3)
    assert target.uses_mask
    _, answer = api.refine(bundle, square, labels, 3)
    assert iou(answer.mask, triangle) > 0.85  # the box alone would give the whole square
    assert iou(answer.mask, square > 0) < 0.7


def test_refine_refuses_a_label_that_is_not_on_the_plane(hf_bundle):
    bundle = api.open_bundle(hf_bundle)
    with pytest.raises(PromptError, match="no pixel on this plane"):
        api.refine(bundle, blob_image(SHAPE), cut_label(), 9)
    with pytest.raises(PromptError, match="positive"):
        api.refine(bundle, blob_image(SHAPE), cut_label(), 0)


def test_cli_refine_writes_a_new_file_with_only_that_id_on_that_plane(hf_bundle, tmp_path,
                                                                     capsys):
    import tifffile

    from napari_sam3_onnx.cli import main

    img = blob_image(SHAPE, blobs=((*CELL[:2], CELL[2]), (15, 20, 6)))
    stack = np.stack([img, img, img])
    labels = np.stack([cut_label(), cut_label(), np.zeros(SHAPE, np.int32)])
    tifffile.imwrite(tmp_path / "img.tif", stack, photometric="minisblack")
    tifffile.imwrite(tmp_path / "lab.tif", labels, photometric="minisblack")
    argv = ["refine", str(hf_bundle), str(tmp_path / "img.tif"), "--labels",
            str(tmp_path / "lab.tif"), "--id", "5", "--index", "1", "--click",
            str(CELL[0]), str(CELL[1] + 6), "--out", str(tmp_path / "new.tif")]
    assert main(argv) == 0
    assert "only this id changed" in capsys.readouterr().out
    out = tifffile.imread(tmp_path / "new.tif")
    plane, _ = api.refine(api.open_bundle(hf_bundle), stack, labels, 5, [[CELL[0], CELL[1] + 6]],
                          [1], index=(1,))
    np.testing.assert_array_equal(out[1], plane)
    np.testing.assert_array_equal(out[[0, 2]], labels[[0, 2]])  # other planes as they were
    assert (out[1] == 5).sum() > (labels[1] == 5).sum() * 1.5
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "lab.tif"), labels)
    onto = [*argv[:-1], str(tmp_path / "lab.tif"), "--overwrite"]
    assert main(onto) == 2 and "labels" in capsys.readouterr().err
    assert main([*argv[:7], "--out", str(tmp_path / "x.tif")]) == 2  # a stack needs --index
    assert "--index" in capsys.readouterr().err and not (tmp_path / "x.tif").exists()


def test_a_negative_click_removes_part_of_the_label(hf_bundle):
    bundle = api.open_bundle(hf_bundle)
    img = blob_image(SHAPE, blobs=((*CELL[:2], CELL[2]), (15, 20, 6)))
    cell = disc(SHAPE, *CELL[:2], CELL[2])
    labels = np.where(cell, 5, 0).astype(np.int32)
    whole, _ = api.refine(bundle, img, labels, 5)
    cut, _ = api.refine(bundle, img, labels, 5, [[CELL[0], CELL[1]], [CELL[0], CELL[1] + 8]],
                        [1, 0])
    near = disc(SHAPE, CELL[0], CELL[1] + 8, 2)
    assert (whole == 5)[near].mean() > 0.8 and not (cut == 5)[near].any()
    assert 0.3 < (cut == 5).sum() / (whole == 5).sum() < 0.95
