"""The one coordinate path between a slice and the model input.

* Slice coordinates are numpy/napari data order ``(row, col)``, with pixel ``(r, c)`` centred on
  the integer position ``(r, c)`` (as napari places pixels).
* Model-input coordinates are ``(x, y)`` pixels of the stretched square input, as SAM 3's
  predictors compute them: ``x = col * W_in / cols``, ``y = row * H_in / rows`` (SAM's prompt
  encoder adds the half-pixel offset itself).

World <-> data coordinates (scale, translate, rotation of a layer) are napari's business and are
handled in the widget with ``layer.world_to_data``; this module starts from data coordinates.
"""

from __future__ import annotations

import numpy as np


def rc_to_model_xy(
    points_rc: np.ndarray, image_shape: tuple[int, int], input_size: tuple[int, int]
) -> np.ndarray:
    """Map ``(N, 2)`` ``(row, col)`` slice positions to ``(N, 2)`` float32 model ``(x, y)``.

    Parameters
    ----------
    points_rc : numpy.ndarray
        ``(N, 2)`` positions in slice pixels, row first.
    image_shape : tuple[int, int]
        ``(rows, cols)`` of the slice.
    input_size : tuple[int, int]
        ``(height, width)`` of the model input.
    """
    pts = np.asarray(points_rc, dtype=np.float64).reshape(-1, 2)
    sy = input_size[0] / image_shape[0]
    sx = input_size[1] / image_shape[1]
    return np.stack([pts[:, 1] * sx, pts[:, 0] * sy], axis=1).astype(np.float32)


def normalise_box_rc(
    box_rc: np.ndarray, image_shape: tuple[int, int]
) -> np.ndarray | None:
    """Order, clip and validate a box given as two corners ``(r0, c0, r1, c1)``.

    Reversed corners are swapped; the box is clipped to the slice (pixel centres
    ``0 .. rows-1``, ``0 .. cols-1``).

    Returns
    -------
    numpy.ndarray or None
        ``(4,)`` float64 ``(r0, c0, r1, c1)`` with ``r0 <= r1`` and ``c0 <= c1``, or None when
        the box lies entirely outside the slice or is degenerate after clipping (zero height
        or width).
    """
    r0, c0, r1, c1 = (float(v) for v in np.asarray(box_rc).reshape(4))
    r0, r1 = min(r0, r1), max(r0, r1)
    c0, c1 = min(c0, c1), max(c0, c1)
    rows, cols = image_shape
    if r1 < 0 or c1 < 0 or r0 > rows - 1 or c0 > cols - 1:
        return None
    r0, r1 = max(r0, 0.0), min(r1, rows - 1.0)
    c0, c1 = max(c0, 0.0), min(c1, cols - 1.0)
    if r1 - r0 < 1.0 or c1 - c0 < 1.0:
        return None
    return np.array([r0, c0, r1, c1])


def box_rc_to_model_points(
    box_rc: np.ndarray, image_shape: tuple[int, int], input_size: tuple[int, int]
) -> np.ndarray:
    """A box ``(r0, c0, r1, c1)`` as SAM's two corner points ``[[x0, y0], [x1, y1]]`` (model px)."""
    r0, c0, r1, c1 = np.asarray(box_rc, dtype=np.float64).reshape(4)
    return rc_to_model_xy(np.array([[r0, c0], [r1, c1]]), image_shape, input_size)


def box_rc_to_cxcywh(box_rc: np.ndarray, image_shape: tuple[int, int]) -> np.ndarray:
    """A box ``(r0, c0, r1, c1)`` as ``(cx, cy, w, h)`` normalised to [0, 1] of the slice."""
    r0, c0, r1, c1 = np.asarray(box_rc, dtype=np.float64).reshape(4)
    rows, cols = image_shape
    x0, x1, y0, y1 = c0 / cols, c1 / cols, r0 / rows, r1 / rows
    return np.array([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dtype=np.float32)


def inside(points_rc: np.ndarray, image_shape: tuple[int, int]) -> np.ndarray:
    """``(N,)`` bool: which ``(row, col)`` points fall on the slice (pixel centres +- 0.5)."""
    pts = np.asarray(points_rc, dtype=np.float64).reshape(-1, 2)
    rows, cols = image_shape
    return (
        (pts[:, 0] >= -0.5) & (pts[:, 0] < rows - 0.5)
        & (pts[:, 1] >= -0.5) & (pts[:, 1] < cols - 0.5)
    )
