"""Whether the contrast window hides what the user prompted (a check for "nothing found").

The model sees a slice through the layer's contrast limits (what the user sees is what the model
sees), so a window set far above the data maps the prompted region to near-black and the model
finds nothing there. :func:`window_hides_region` tells that case apart from a genuinely empty
region: the window maps the region to near-black **while** the raw values there still vary.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from napari_sam3_onnx.engine.slices import extract_plane, window_to_uint8

#: A region whose 99th percentile maps below this 8-bit value looks black.
DARK = 16
#: Padding (slice pixels, at least) around the prompts when judging their region.
PAD = 16


def prompt_region(
    points_rc: np.ndarray | None,
    boxes_rc: Sequence[np.ndarray] = (),
    shape: tuple[int, int] = (0, 0),
    pad: int = PAD,
) -> tuple[int, int, int, int] | None:
    """Bounding box ``(r0, c0, r1, c1)`` (half-open) of clicks and boxes, padded and clipped.

    Parameters
    ----------
    points_rc : numpy.ndarray or None
        ``(N, 2)`` clicks ``(row, col)`` in slice pixels.
    boxes_rc : sequence of numpy.ndarray
        ``(4,)`` boxes ``(r0, c0, r1, c1)`` in slice pixels (any corner order).
    shape : tuple[int, int]
        ``(rows, cols)`` of the slice.
    pad : int
        Pixels added on every side (at least 5 % of the slice's smaller side).

    Returns
    -------
    tuple of int or None
        None when there are no prompts inside the slice.
    """
    rows = [np.asarray(points_rc, float).reshape(-1, 2)] if points_rc is not None else []
    rows += [np.asarray(b, float).reshape(2, 2) for b in boxes_rc]
    pts = np.concatenate(rows) if rows else np.zeros((0, 2))
    if not len(pts):
        return None
    pad = max(int(pad), int(0.05 * min(shape)))
    r0, c0 = np.floor(pts.min(axis=0)).astype(int) - pad
    r1, c1 = np.ceil(pts.max(axis=0)).astype(int) + pad + 1
    r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, shape[0]), min(c1, shape[1])
    return (r0, c0, r1, c1) if r1 > r0 and c1 > c0 else None


def window_hides_region(
    data,
    index: Sequence[int],
    window: tuple[float, float] | None,
    region: tuple[int, int, int, int] | None = None,
    rgb: bool = False,
    dark: int = DARK,
) -> bool:
    """True when ``window`` maps the region to near-black although its raw values vary.

    Parameters
    ----------
    data : array-like
        ``(..., rows, cols)`` image (numpy, dask, zarr).
    index : sequence of int
        The plane's index along the leading axes.
    window : tuple[float, float] or None
        The contrast limits the model sees the plane through; None (no window) never hides.
    region : tuple of int, optional
        ``(r0, c0, r1, c1)`` half-open rectangle of the plane; None for the whole plane.
    rgb : bool
        Colour data pass through without a window: never hidden.
    dark : int
        8-bit value below which the region's 99th percentile counts as black.
    """
    if window is None or rgb:
        return False
    raw = np.asarray(extract_plane(data, tuple(index), False, region), dtype=np.float32)
    if raw.size == 0:
        return False
    lo, hi = np.percentile(raw, [1.0, 99.0])
    if hi <= lo:  # flat region: nothing to reveal, whatever the window
        return False
    return bool(np.percentile(window_to_uint8(raw, window), 99.0) < dark)
