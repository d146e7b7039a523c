"""Bilinear resampling shared by encoder preprocessing and mask post-processing.

SAM 3 stretches every image to its square input (no letterbox) and returns masks on a square grid
that is stretched back. Both directions are separable linear resampling: ``out = Wr @ img @ Wc.T``
with sparse weight matrices built once per (size_in, size_out) pair.

* Upsampling uses the triangle (bilinear) kernel with ``align_corners=False`` and edge clamping,
  which equals ``torch.nn.functional.interpolate(mode="bilinear", align_corners=False)``.
* Downsampling widens the kernel by the scale factor (antialiasing, as PIL's BILINEAR and
  torchvision's ``Resize(antialias=True)`` do), so small bright objects are averaged, not skipped.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import scipy.sparse as sp


@lru_cache(maxsize=64)
def resample_matrix(n_in: int, n_out: int, antialias: bool = True) -> sp.csr_matrix:
    """Sparse ``(n_out, n_in)`` float32 matrix of 1-D bilinear resampling weights.

    Parameters
    ----------
    n_in, n_out : int
        Number of input and output samples along the axis.
    antialias : bool
        Widen the kernel when downsampling.
    """
    if n_in < 1 or n_out < 1:
        raise ValueError(f"sizes must be positive, got {n_in} -> {n_out}")
    scale = n_in / n_out
    support = scale if (antialias and scale > 1.0) else 1.0
    centers = (np.arange(n_out) + 0.5) * scale  # in input pixel units (pixel i spans [i, i+1))
    lo = np.floor(centers - support).astype(np.int64)
    hi = np.ceil(centers + support).astype(np.int64)
    width = int((hi - lo).max()) + 1
    idx = lo[:, None] + np.arange(width)[None, :]
    dist = np.abs((idx + 0.5) - centers[:, None]) / support
    w = np.clip(1.0 - dist, 0.0, None)
    w[(idx < 0) | (idx >= n_in)] = 0.0
    total = w.sum(axis=1, keepdims=True)
    # Centres within half a pixel of the border see only the edge pixel: clamp (as torch does).
    empty = total[:, 0] == 0
    if empty.any():
        nearest = np.clip(np.floor(centers[empty]).astype(np.int64), 0, n_in - 1)
        idx[empty, 0] = nearest
        w[empty, 0] = 1.0
        total[empty] = 1.0
    w = w / total
    idx = np.clip(idx, 0, n_in - 1)
    rows = np.repeat(np.arange(n_out), width)
    m = sp.coo_matrix(
        (w.ravel().astype(np.float32), (rows, idx.ravel())), shape=(n_out, n_in)
    ).tocsr()
    m.sum_duplicates()
    return m


def resize_bilinear(
    image: np.ndarray, out_shape: tuple[int, int], antialias: bool = True
) -> np.ndarray:
    """Resize the first two axes of ``image`` to ``out_shape`` (stretching, no aspect kept).

    Parameters
    ----------
    image : numpy.ndarray
        ``(rows, cols)`` or ``(rows, cols, channels)`` array of any real dtype.
    out_shape : tuple[int, int]
        ``(rows, cols)`` of the result.
    antialias : bool
        Widen the kernel when downsampling.

    Returns
    -------
    numpy.ndarray
        float32 array of shape ``out_shape (+ channels)``.
    """
    rows, cols = image.shape[:2]
    out_r, out_c = int(out_shape[0]), int(out_shape[1])
    img = np.asarray(image, dtype=np.float32)
    extra = img.shape[2:]
    flat = img.reshape(rows, cols, -1)
    wr = resample_matrix(rows, out_r, antialias)
    wc = resample_matrix(cols, out_c, antialias)
    # rows first: (out_r, rows) @ (rows, cols*ch) -> (out_r, cols, ch)
    tmp = (wr @ flat.reshape(rows, -1)).reshape(out_r, cols, -1)
    # then columns: for each channel (out_r, cols) @ (cols, out_c)
    tmp = np.moveaxis(tmp, 1, 0).reshape(cols, -1)  # (cols, out_r*ch)
    out = (wc @ tmp).reshape(out_c, out_r, -1)
    out = np.moveaxis(out, 0, 1)
    return np.ascontiguousarray(out.reshape((out_r, out_c, *extra)), dtype=np.float32)


def resize_rgb_uint8(rgb: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    """Resize a ``(rows, cols, 3)`` uint8 image to ``out_shape``; returns uint8 (rounded).

    A gray image in RGB form (three equal channels, what a microscopy plane becomes) is resized
    once and repeated: the same pixels as resizing each channel (the channels are resampled
    independently with the same weights), at a third of the cost.
    """
    if rgb.shape[:2] == tuple(out_shape):
        return np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim == 3 and rgb.shape[2] == 3 and _equal_channels(rgb):
        gray = resize_bilinear(rgb[:, :, 0], out_shape, antialias=True)
        gray8 = np.clip(np.rint(gray), 0, 255).astype(np.uint8)
        return np.repeat(gray8[:, :, None], 3, axis=2)
    out = resize_bilinear(rgb, out_shape, antialias=True)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _equal_channels(rgb: np.ndarray) -> bool:
    """Whether the three channels of ``(rows, cols, 3)`` hold the same values."""
    if rgb.strides[2] == 0:
        return True
    return bool(np.array_equal(rgb[:, :, 0], rgb[:, :, 1])
                and np.array_equal(rgb[:, :, 0], rgb[:, :, 2]))
