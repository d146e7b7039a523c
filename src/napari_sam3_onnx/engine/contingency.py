"""Overlap counts between two label images, accumulated plane by plane.

Matching predicted objects against true ones needs, for every pair of ids, how many pixels
(voxels) carry both, and each id's area. Those counts are sums over planes, so a volume never
needs to be in memory: :class:`Contingency` adds one plane pair at a time and keeps only the
pairs that occur (a table the size of the objects, not of the stack). :func:`iou_from_pairs`
turns the table into the IoU matrix; :func:`~.evaluation.overlap_iou` (whole arrays) and
:func:`~.evaluation.evaluate_labels` (planes streamed) both go through it, so they agree exactly.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

#: Pixels counted per step of :meth:`Contingency.add` (bounds its temporaries to ~1.3 MB).
BLOCK = 1 << 15


def check_labels(pred, gt) -> None:
    """ValueError unless ``pred`` and ``gt`` are integer (or bool) labels of one shape.

    Parameters
    ----------
    pred, gt : array-like
        Anything with ``shape`` and ``dtype`` (numpy, memmap, zarr, dask, a lazy file view).
    """
    if tuple(pred.shape) != tuple(gt.shape):
        raise ValueError(f"prediction {tuple(pred.shape)} and ground truth {tuple(gt.shape)} "
                         "differ in shape")
    for name, a in (("prediction", pred), ("ground truth", gt)):
        dtype = np.dtype(a.dtype)
        if not (np.issubdtype(dtype, np.integer) or dtype == np.bool_):
            raise ValueError(f"the {name} is {dtype}, not a label image of integer ids")


def iou_from_pairs(
    pairs: np.ndarray, p_ids: np.ndarray, g_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IoU of every predicted object with every true object, from their overlap counts.

    Parameters
    ----------
    pairs : numpy.ndarray
        ``(len(p_ids), len(g_ids))`` float64: pixels carrying predicted id ``p_ids[i]`` and true
        id ``g_ids[j]`` (background 0 included where present, so the row and column sums are
        the areas).
    p_ids, g_ids : numpy.ndarray
        The sorted ids of each image.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        ``(P, G)`` float64 IoU, and the ``(P,)`` predicted and ``(G,)`` true ids other than 0
        it is indexed by.
    """
    p_area, g_area = pairs.sum(axis=1), pairs.sum(axis=0)
    keep_p, keep_g = p_ids != 0, g_ids != 0
    inter = pairs[np.ix_(keep_p, keep_g)]
    union = p_area[keep_p][:, None] + g_area[keep_g][None, :] - inter
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
    return iou, p_ids[keep_p], g_ids[keep_g]


class Contingency:
    """Pixel counts per (predicted id, true id) pair, summed over the planes added.

    Parameters
    ----------
    p_dtype, g_dtype : numpy.dtype
        The labels' dtypes (the ids come back in them).

    Examples
    --------
    >>> table = Contingency(pred.dtype, gt.dtype)
    >>> for z in range(pred.shape[0]):
    ...     table.add(pred[z], gt[z])                 # one (rows, cols) plane pair at a time
    >>> iou, p_ids, g_ids = table.iou()
    """

    def __init__(self, p_dtype, g_dtype) -> None:
        self.p_dtype, self.g_dtype = np.dtype(p_dtype), np.dtype(g_dtype)
        self._pairs: Counter[tuple[int, int]] = Counter()

    def add(self, pred, gt) -> None:
        """Count the pairs of one plane (or any block) of equal-shaped labels.

        The pixels are counted :data:`BLOCK` at a time, so the sorting temporaries (about 40
        bytes a pixel) stay far below the size of the plane itself.
        """
        pred, gt = np.asarray(pred).reshape(-1), np.asarray(gt).reshape(-1)
        if pred.shape != gt.shape:
            raise ValueError(f"planes of {pred.size} and {gt.size} pixels")
        for start in range(0, pred.size, BLOCK):
            self._add_block(pred[start:start + BLOCK], gt[start:start + BLOCK])

    def _add_block(self, pred: np.ndarray, gt: np.ndarray) -> None:
        p_ids, key = np.unique(pred, return_inverse=True)
        g_ids, g_inv = np.unique(gt, return_inverse=True)
        key = key.astype(np.int64, copy=False)
        key *= len(g_ids)
        key += g_inv
        del g_inv
        keys, counts = np.unique(key, return_counts=True)
        for p, g, n in zip(p_ids[keys // len(g_ids)].tolist(), g_ids[keys % len(g_ids)].tolist(),
                           counts.tolist(), strict=True):
            self._pairs[(p, g)] += n

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(P, G)`` float64 overlap counts and the sorted ``(P,)``, ``(G,)`` ids (0 included)."""
        p_ids = np.unique(np.array([p for p, _ in self._pairs], self.p_dtype))
        g_ids = np.unique(np.array([g for _, g in self._pairs], self.g_dtype))
        pairs = np.zeros((len(p_ids), len(g_ids)), np.int64)
        if self._pairs:
            ps = np.array([p for p, _ in self._pairs], self.p_dtype)
            gs = np.array([g for _, g in self._pairs], self.g_dtype)
            pairs[np.searchsorted(p_ids, ps), np.searchsorted(g_ids, gs)] = list(
                self._pairs.values())
        return pairs.astype(np.float64), p_ids, g_ids

    def iou(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The IoU matrix and the ids other than 0 (see :func:`iou_from_pairs`)."""
        return iou_from_pairs(*self.table())
