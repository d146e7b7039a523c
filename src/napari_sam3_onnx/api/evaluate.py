"""Label images against ground truth: mSA, precision, recall, F1, AP50 per image and overall."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..engine.evaluation import COLUMNS, THRESHOLDS, Evaluation, evaluate_labels, pooled
from .io import InputError, read_image


@dataclass(frozen=True)
class EvaluationReport:
    """Per-image evaluations and their pooled total.

    Attributes
    ----------
    images : tuple of Evaluation
        One per (prediction, ground truth) pair.
    overall : Evaluation
        TP / FP / FN summed over the images at each threshold (named ``"overall"``).
    """

    images: tuple[Evaluation, ...]
    overall: Evaluation

    @property
    def columns(self) -> tuple[str, ...]:
        """Columns of :meth:`rows` (see :data:`~napari_sam3_onnx.engine.evaluation.COLUMNS`)."""
        return COLUMNS

    def rows(self) -> list[dict]:
        """One row per image, then the overall row (only when there are several images)."""
        rows = [e.row() for e in self.images]
        return [*rows, self.overall.row()] if len(self.images) > 1 else rows

    def text(self) -> str:
        """A short plain-text table (image, objects, mSA, precision, recall, F1, AP50)."""
        head = f"{'image':<24} {'pred':>5} {'true':>5} {'mSA':>6} {'prec':>6} {'recall':>6} " \
               f"{'F1':>6} {'AP50':>6}"
        lines = [head]
        for r in self.rows():
            lines.append(f"{str(r['image'])[:24]:<24} {r['n_pred']:>5} {r['n_true']:>5} "
                         f"{r['msa']:>6.3f} {r['precision']:>6.3f} {r['recall']:>6.3f} "
                         f"{r['f1']:>6.3f} {r['ap50']:>6.3f}")
        return "\n".join(lines)


def _labels(item, what: str) -> np.ndarray:
    arr = read_image(item) if isinstance(item, (str, Path)) else item
    if not (hasattr(arr, "shape") and hasattr(arr, "dtype")):
        arr = np.asarray(arr)  # lazy arrays stay lazy: they are read plane by plane
    if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise InputError(f"The {what} is {arr.dtype}; give a label image of integer ids.")
    return arr


def _name(item, k: int) -> str:
    return Path(item).stem if isinstance(item, (str, Path)) else f"image{k}"


def evaluate(
    pred, gt, *, names: Sequence[str] | None = None, thresholds: Sequence[float] = THRESHOLDS,
) -> EvaluationReport:
    """Match predicted instances against ground truth at IoU 0.50:0.05:0.95.

    Parameters
    ----------
    pred, gt : array-like or path, or lists of them (paired in order)
        Integer label images of equal shapes, 2-D ``(rows, cols)`` or 3-D ``(planes, rows,
        cols)`` (matched as volumes: one id per object through z); 0 = background. Files are
        read with :func:`~.io.read_image` and, like memmaps or zarr/dask arrays, one plane at
        a time: only the overlap counts per pair of ids are kept, never a whole volume.
    names : sequence of str, optional
        Names for the table (default: the prediction's file name, or ``image0``, ...).
    thresholds : sequence of float
        IoU thresholds; a pair counts as a match when its IoU exceeds the threshold.

    Returns
    -------
    EvaluationReport
        Per image and overall: mSA (mean of ``TP / (TP + FP + FN)`` over the thresholds) and,
        at IoU 0.5, precision, recall, F1 and AP50 (see :mod:`~..engine.evaluation`).

    Raises
    ------
    InputError
        Unequal numbers of predictions and ground truths, unequal shapes, or non-integer data.

    Examples
    --------
    >>> report = api.evaluate("pred.tif", "truth.tif")            # label images, same shape
    >>> report.overall                                          # mSA, F1, AP50 over the images
    """
    preds = list(pred) if isinstance(pred, (list, tuple)) else [pred]
    gts = list(gt) if isinstance(gt, (list, tuple)) else [gt]
    if len(preds) != len(gts):
        raise InputError(f"{len(preds)} predictions but {len(gts)} ground truths")
    if not preds:
        raise InputError("nothing to evaluate")
    names = list(names) if names is not None else [_name(p, k) for k, p in enumerate(preds)]
    results = []
    for p, g, n in zip(preds, gts, names, strict=True):
        pa, ga = _labels(p, "prediction"), _labels(g, "ground truth")
        if tuple(pa.shape) != tuple(ga.shape):
            raise InputError(f"{n}: the prediction has shape {tuple(pa.shape)} but the ground "
                             f"truth {tuple(ga.shape)}")
        results.append(evaluate_labels(pa, ga, n, thresholds))
    return EvaluationReport(tuple(results), pooled(results))
