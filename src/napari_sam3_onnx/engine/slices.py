"""From a layer's data to the 8-bit RGB image the model sees.

Microscopy slices are uint16 or float with a contrast window chosen by the user; SAM 3 expects
8-bit RGB. What the user sees is what the model sees: the slice is mapped to [0, 255] through the
same window napari displays (``contrast_limits``), and RGB(A) data passes through.

Coordinate order throughout: numpy order, ``(..., rows, cols[, channels])``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def extract_plane(
    data, index: Sequence[int], rgb: bool = False, region: Sequence[int] | None = None
) -> np.ndarray:
    """Read one 2-D plane (or RGB plane) of an n-D array, or a rectangle of it.

    Parameters
    ----------
    data : array-like
        ``(..., rows, cols)`` or, with ``rgb``, ``(..., rows, cols, 3|4)``; numpy, dask or zarr.
    index : Sequence[int]
        One index per leading (non-displayed) axis: ``()`` for 2-D data, ``(z,)`` for 3-D,
        ``(t, z)`` for 4-D.
    rgb : bool
        The last axis holds colour channels.
    region : Sequence[int], optional
        ``(r0, c0, r1, c1)``: only rows ``r0:r1`` and columns ``c0:c1`` (half-open, plane
        pixels) are read, so a tile of a lazily loaded (dask, zarr) plane costs only the tile.

    Returns
    -------
    numpy.ndarray
        ``(rows, cols)`` or ``(rows, cols, channels)`` (the region's size when one is given),
        loaded into memory.
    """
    plane_ndim = 3 if rgb else 2
    lead = data.ndim - plane_ndim
    if lead < 0:
        raise ValueError(f"data with {data.ndim} dims cannot hold a {plane_ndim}-D plane")
    index = tuple(int(i) for i in index)
    if len(index) != lead:
        raise ValueError(f"need {lead} leading indices for data of shape {data.shape}, got {index}")
    for i, (k, n) in enumerate(zip(index, data.shape[:lead], strict=True)):
        if not 0 <= k < n:
            raise IndexError(f"index {k} out of range for axis {i} of size {n}")
    if region is None:
        return np.asarray(data[index])
    r0, c0, r1, c1 = (int(v) for v in region)
    rows, cols = data.shape[lead], data.shape[lead + 1]
    if not (0 <= r0 < r1 <= rows and 0 <= c0 < c1 <= cols):
        raise IndexError(f"region {(r0, c0, r1, c1)} is not inside the {rows} x {cols} plane")
    return np.asarray(data[(*index, slice(r0, r1), slice(c0, c1))])


def window_to_uint8(plane: np.ndarray, contrast_limits: tuple[float, float]) -> np.ndarray:
    """Map values through a contrast window to uint8: ``lo -> 0``, ``hi -> 255``, clipped.

    Parameters
    ----------
    plane : numpy.ndarray
        Any real dtype, any shape.
    contrast_limits : tuple[float, float]
        ``(lo, hi)`` as napari's ``layer.contrast_limits``. ``hi <= lo`` maps everything at or
        above ``lo`` to 255 (a flat window).
    """
    lo, hi = float(contrast_limits[0]), float(contrast_limits[1])
    x = plane.astype(np.float32, copy=False)
    if hi <= lo:
        return np.where(x >= lo, 255, 0).astype(np.uint8)
    scaled = (x - lo) * (255.0 / (hi - lo))
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def plane_to_rgb(
    plane: np.ndarray,
    contrast_limits: tuple[float, float] | None = None,
    rgb: bool = False,
) -> np.ndarray:
    """Turn a plane into the ``(rows, cols, 3)`` uint8 RGB image an adapter encodes.

    Parameters
    ----------
    plane : numpy.ndarray
        ``(rows, cols)`` grayscale, or ``(rows, cols, 3|4)`` colour when ``rgb``.
    contrast_limits : tuple[float, float], optional
        The display window. None: uint8 data is used as is, bool maps False/True to 0/255,
        other dtypes use the plane's min and max. A constant plane (one value or colour
        everywhere) maps to black with any window.
    rgb : bool
        ``plane`` has colour channels (alpha is dropped).

    Returns
    -------
    numpy.ndarray
        ``(rows, cols, 3)`` uint8.
    """
    if rgb:
        if plane.ndim != 3 or plane.shape[2] not in (3, 4):
            raise ValueError(f"an RGB plane must be (rows, cols, 3|4), got {plane.shape}")
        colour = plane[..., :3]
        if _constant(colour):
            return np.zeros((*plane.shape[:2], 3), np.uint8)
        if colour.dtype == np.uint8 and contrast_limits is None:
            return np.ascontiguousarray(colour)
        limits = contrast_limits or _default_limits(colour)
        return window_to_uint8(colour, limits)
    if plane.ndim != 2:
        raise ValueError(f"a grayscale plane must be (rows, cols), got {plane.shape}")
    if _constant(plane):
        return np.zeros((*plane.shape, 3), np.uint8)
    if plane.dtype == np.uint8 and contrast_limits is None:
        gray = plane
    else:
        gray = window_to_uint8(plane, contrast_limits or _default_limits(plane))
    return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))


def _constant(plane: np.ndarray) -> bool:
    """Whether every pixel of ``plane`` has one value (or colour; NaN and inf ignored).

    Such a plane (zero padding, an empty or an all-True mask, a saturated frame) has nothing
    to segment whatever its value and whatever the window, so it maps to black.
    """
    if plane.ndim == 3:
        return bool((plane == plane[0, 0]).all())
    if np.issubdtype(plane.dtype, np.floating):
        plane = plane[np.isfinite(plane)]
    if plane.size == 0:
        return True
    return bool((plane == plane.flat[0]).all())


def _default_limits(plane: np.ndarray) -> tuple[float, float]:
    """The window used when the caller gives none: the plane's finite min and max.

    ``bool`` planes use ``(0, 1)`` (False black, True white). A plane with one value (zero
    padding, an empty mask image) has no contrast to stretch: it gets a window starting at that
    value, so it maps to black like the blank it is, never to a white image the model would
    find objects in.
    """
    if plane.dtype == np.uint8:
        return 0.0, 255.0
    if plane.dtype == np.bool_:
        return 0.0, 1.0
    finite = plane[np.isfinite(plane)] if np.issubdtype(plane.dtype, np.floating) else plane
    if finite.size == 0:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:  # constant: keep lo -> 0 with a window wide enough to survive float rounding
        return lo, lo + max(1.0, abs(lo))
    return lo, hi
