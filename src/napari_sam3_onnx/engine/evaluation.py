"""Instance segmentation against ground truth: matching at IoU thresholds, mSA, precision, recall.

The measures are those of StarDist's and micro-sam's evaluations (and of the 2018 Data Science
Bowl): at each IoU threshold ``t`` in 0.50, 0.55, ..., 0.95, predicted and true objects are
matched one to one (optimal matching on IoU, :func:`scipy.optimize.linear_sum_assignment`) and a
pair counts as a true positive when its IoU exceeds ``t``. Unmatched predictions are false
positives, unmatched true objects false negatives. Then

* segmentation accuracy ``SA(t) = TP / (TP + FP + FN)``; mSA is its mean over the ten thresholds
  (micro-sam's headline number; StarDist calls ``SA`` "accuracy");
* precision ``TP / (TP + FP)``, recall ``TP / (TP + FN)``, F1 ``2TP / (2TP + FP + FN)``;
* AP50 is the Data Science Bowl's "average precision" at IoU 0.5, which is ``SA(0.5)`` (the
  labels carry no per-object scores for a ranked, COCO-style AP).

Undefined ratios: when nothing was to be found and nothing was found (``TP = FP = FN = 0``)
every measure is 1.0; otherwise a ratio with a zero denominator is 0.0 (e.g. the precision of an
empty prediction). Labels are integer arrays of any dimension (2-D planes, 3-D volumes), 0 is
background, and an object is every pixel (voxel) with one id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from .contingency import Contingency, check_labels, iou_from_pairs

#: IoU thresholds 0.50:0.05:0.95.
THRESHOLDS = tuple(round(0.5 + 0.05 * k, 2) for k in range(10))


def overlap_iou(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IoU of every predicted object with every true object.

    Parameters
    ----------
    pred, gt : numpy.ndarray
        Integer label arrays of the same shape (any dimension), 0 = background.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        ``(P, G)`` float64 IoU, and the ``(P,)`` predicted and ``(G,)`` true ids it is indexed by.
    """
    pred, gt = np.asarray(pred), np.asarray(gt)
    check_labels(pred, gt)
    p_ids, p_inv = np.unique(pred.ravel(), return_inverse=True)
    g_ids, g_inv = np.unique(gt.ravel(), return_inverse=True)
    pairs = np.bincount(p_inv * len(g_ids) + g_inv, minlength=len(p_ids) * len(g_ids))
    pairs = pairs.reshape(len(p_ids), len(g_ids)).astype(np.float64)
    return iou_from_pairs(pairs, p_ids, g_ids)


def streamed_iou(pred, gt) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`overlap_iou` of two label volumes read one plane at a time.

    Parameters
    ----------
    pred, gt : array-like
        Integer labels of one shape, ``(rows, cols)`` or ``(..., rows, cols)``: numpy, memmap,
        zarr, dask or a lazy file view (:func:`~..api.io.read_image`), indexed by leading
        integer indices. Only one plane of each is in memory at a time; the result is exactly
        :func:`overlap_iou` of the whole arrays.
    """
    pred, gt = (a if hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)
                for a in (pred, gt))
    check_labels(pred, gt)
    table = Contingency(pred.dtype, gt.dtype)
    if len(pred.shape) <= 2:
        table.add(pred, gt)
    else:
        for index in np.ndindex(*(int(n) for n in pred.shape[:-2])):
            table.add(pred[index], gt[index])
    return table.iou()


def match_pairs(iou: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """An optimal one-to-one matching's pairs ``(row, col)`` whose IoU exceeds ``threshold``.

    The matching maximises the number of pairs above the threshold (then their total IoU), as
    StarDist's matching does.
    """
    if iou.size == 0:
        return []
    hit = iou > threshold
    if not hit.any():
        return []
    n = max(iou.shape)
    rows, cols = linear_sum_assignment(-(hit.astype(np.float64) + iou / (2 * n)))
    return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if hit[r, c]]


def true_positives(iou: np.ndarray, threshold: float) -> int:
    """Pairs of an optimal one-to-one matching whose IoU exceeds ``threshold``."""
    return len(match_pairs(iou, threshold))


def _ratio(num: float, den: float, nothing_to_do: bool) -> float:
    if den > 0:
        return float(num) / float(den)
    return 1.0 if nothing_to_do else 0.0


@dataclass(frozen=True)
class Counts:
    """Matching at one IoU threshold."""

    threshold: float
    tp: int
    fp: int
    fn: int

    @property
    def _empty(self) -> bool:
        return self.tp + self.fp + self.fn == 0

    @property
    def accuracy(self) -> float:
        """Segmentation accuracy ``TP / (TP + FP + FN)``."""
        return _ratio(self.tp, self.tp + self.fp + self.fn, self._empty)

    @property
    def precision(self) -> float:
        """``TP / (TP + FP)``."""
        return _ratio(self.tp, self.tp + self.fp, self._empty)

    @property
    def recall(self) -> float:
        """``TP / (TP + FN)``."""
        return _ratio(self.tp, self.tp + self.fn, self._empty)

    @property
    def f1(self) -> float:
        """``2 TP / (2 TP + FP + FN)``."""
        return _ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn, self._empty)


@dataclass(frozen=True)
class Evaluation:
    """The measures of one image (or of several, counts pooled).

    Attributes
    ----------
    name : str
        The image's name (``"overall"`` for pooled counts).
    n_pred, n_true : int
        Objects in the prediction and in the ground truth.
    counts : tuple of Counts
        One per threshold of :data:`THRESHOLDS`.
    """

    name: str
    n_pred: int
    n_true: int
    counts: tuple[Counts, ...]

    def at(self, threshold: float) -> Counts:
        """The counts at one of the thresholds."""
        for c in self.counts:
            if abs(c.threshold - threshold) < 1e-9:
                return c
        raise KeyError(f"no threshold {threshold}; have {[c.threshold for c in self.counts]}")

    @property
    def msa(self) -> float:
        """Mean segmentation accuracy over the thresholds."""
        return float(np.mean([c.accuracy for c in self.counts]))

    def row(self) -> dict:
        """One table row: see :data:`COLUMNS`."""
        c50 = self.at(0.5)
        row = {"image": self.name, "n_pred": self.n_pred, "n_true": self.n_true,
               "msa": round(self.msa, 6), "precision": round(c50.precision, 6),
               "recall": round(c50.recall, 6), "f1": round(c50.f1, 6),
               "ap50": round(c50.accuracy, 6), "tp50": c50.tp, "fp50": c50.fp, "fn50": c50.fn}
        row.update({f"sa{round(c.threshold * 100):02d}": round(c.accuracy, 6)
                    for c in self.counts})
        return row


#: Columns of :meth:`Evaluation.row`: precision, recall, F1, AP50 and the counts are at IoU 0.5;
#: ``sa50`` .. ``sa95`` the segmentation accuracy at each threshold.
COLUMNS = ("image", "n_pred", "n_true", "msa", "precision", "recall", "f1", "ap50", "tp50",
           "fp50", "fn50", *(f"sa{round(t * 100):02d}" for t in THRESHOLDS))


def evaluate_labels(
    pred, gt, name: str = "image",
    thresholds: Sequence[float] = THRESHOLDS,
) -> Evaluation:
    """Match a predicted label image against the ground truth at each IoU threshold.

    Parameters
    ----------
    pred, gt : array-like
        Integer labels of the same shape (``(rows, cols)``, ``(planes, rows, cols)``, ...);
        0 = background. A 3-D array is matched as volumes: an object is one id through z.
        Read one plane at a time (:func:`streamed_iou`): memmaps and lazy views stay on disk.
    name : str
        For the table.
    thresholds : sequence of float
        IoU thresholds (default 0.50:0.05:0.95).
    """
    iou, p_ids, g_ids = streamed_iou(pred, gt)
    counts = []
    for t in thresholds:
        tp = true_positives(iou, t)
        counts.append(Counts(float(t), tp, len(p_ids) - tp, len(g_ids) - tp))
    return Evaluation(name, len(p_ids), len(g_ids), tuple(counts))


def pooled(results: Sequence[Evaluation], name: str = "overall") -> Evaluation:
    """One evaluation of several images: their counts summed per threshold."""
    if not results:
        raise ValueError("nothing to pool")
    counts = []
    for k, c in enumerate(results[0].counts):
        tp = sum(r.counts[k].tp for r in results)
        fp = sum(r.counts[k].fp for r in results)
        fn = sum(r.counts[k].fn for r in results)
        counts.append(Counts(c.threshold, tp, fp, fn))
    return Evaluation(name, sum(r.n_pred for r in results), sum(r.n_true for r in results),
                      tuple(counts))
