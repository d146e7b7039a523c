"""Evaluation against ground truth on hand-made label pairs with known TP / FP / FN."""

import numpy as np
import pytest

from napari_sam3_onnx.engine.evaluation import (
    COLUMNS,
    THRESHOLDS,
    evaluate_labels,
    overlap_iou,
    pooled,
)


def _pair_2d():
    """Ground truth: 3 objects; prediction: one exact, one at IoU 0.6, one missed, one extra."""
    gt = np.zeros((40, 70), np.int32)
    gt[2:12, 3:13] = 1          # 100 px
    gt[20:30, 30:40] = 7        # 100 px
    gt[5:9, 50:60] = 3          # 40 px: missed
    pred = np.zeros_like(gt)
    pred[2:12, 3:13] = 5        # exact
    pred[20:30, 34:40] = 2      # 60 px inside object 7: IoU 0.6
    pred[32:38, 60:66] = 9      # nothing there
    return pred, gt


def test_known_counts_at_each_threshold_2d():
    pred, gt = _pair_2d()
    ev = evaluate_labels(pred, gt, "a")
    assert (ev.n_pred, ev.n_true) == (3, 3)
    c50, c60, c65 = ev.at(0.5), ev.at(0.6), ev.at(0.65)
    assert (c50.tp, c50.fp, c50.fn) == (2, 1, 1)
    assert (c60.tp, c60.fp, c60.fn) == (1, 2, 2)  # IoU 0.6 is not above 0.6
    assert (c65.tp, c65.fp, c65.fn) == (1, 2, 2)
    assert c50.accuracy == pytest.approx(2 / 4) and c50.precision == pytest.approx(2 / 3)
    assert c50.recall == pytest.approx(2 / 3) and c50.f1 == pytest.approx(4 / 6)
    expected = (2 / 4 * 2 + 1 / 5 * 8) / 10  # 0.5, 0.55: 2 TP; 0.6 .. 0.95: 1 TP
    assert ev.msa == pytest.approx(expected)
    row = ev.row()
    assert list(row) == list(COLUMNS)
    assert row["ap50"] == pytest.approx(0.5) and row["sa95"] == pytest.approx(0.2)


def test_matching_is_one_to_one():
    gt = np.zeros((10, 30), np.int32)
    gt[:, :10] = 1
    pred = np.zeros_like(gt)
    pred[:, :6] = 1   # IoU 0.6 with the object
    pred[:, 6:10] = 2  # IoU 0.4: the same object cannot be matched twice
    ev = evaluate_labels(pred, gt)
    assert (ev.at(0.5).tp, ev.at(0.5).fp, ev.at(0.5).fn) == (1, 1, 0)


def test_3d_objects_are_volumes():
    gt = np.zeros((4, 20, 30), np.int32)
    gt[0:4, 2:8, 2:8] = 1
    gt[1:3, 10:18, 15:25] = 2
    pred = gt.copy()
    pred[0:2, 2:8, 2:8] = 4   # object 1 split into two ids through z: each IoU 0.5
    pred[2:4, 2:8, 2:8] = 5
    ev = evaluate_labels(pred, gt)
    c = ev.at(0.5)
    assert (c.tp, c.fp, c.fn) == (1, 2, 1)  # 0.5 is not above 0.5
    assert ev.n_pred == 3


def test_empty_prediction_and_empty_ground_truth():
    _, gt = _pair_2d()
    none = np.zeros_like(gt)
    ev = evaluate_labels(none, gt)
    assert (ev.at(0.5).tp, ev.at(0.5).fp, ev.at(0.5).fn) == (0, 0, 3)
    assert ev.msa == 0.0 and ev.at(0.5).precision == 0.0 and ev.at(0.5).recall == 0.0
    ev = evaluate_labels(gt, none)
    assert (ev.at(0.5).tp, ev.at(0.5).fp, ev.at(0.5).fn) == (0, 3, 0)
    assert ev.msa == 0.0 and ev.at(0.5).recall == 0.0
    both = evaluate_labels(none, none)
    assert both.msa == 1.0 and both.at(0.5).f1 == 1.0  # nothing to find, nothing found


def test_pooled_counts_and_thresholds():
    pred, gt = _pair_2d()
    a = evaluate_labels(pred, gt, "a")
    b = evaluate_labels(gt, gt, "b")
    tot = pooled([a, b])
    assert tot.at(0.5).tp == 2 + 3 and tot.at(0.5).fn == 1 and tot.at(0.5).fp == 1
    assert tot.n_true == 6 and tot.name == "overall"
    assert THRESHOLDS[0] == 0.5 and THRESHOLDS[-1] == 0.95 and len(THRESHOLDS) == 10


def test_shapes_and_dtypes_are_checked():
    with pytest.raises(ValueError, match="shape"):
        overlap_iou(np.zeros((3, 4), int), np.zeros((4, 3), int))
    with pytest.raises(ValueError, match="integer"):
        overlap_iou(np.zeros((3, 4)), np.zeros((3, 4), int))
