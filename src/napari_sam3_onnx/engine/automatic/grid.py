"""Where the clicks go: SAM's point grids and crop boxes.

Points are normalised ``(x, y)`` in [0, 1] of the plane (or crop) they cover, ``x`` along the
columns; boxes are ``(r0, c0, r1, c1)`` half-open plane pixels (numpy order, as in
:mod:`..tiling`).
"""

from __future__ import annotations

import math

import numpy as np

from napari_sam3_onnx.engine.tiling.tiles import Box


def point_grid(points_per_side: int) -> np.ndarray:
    """``(n*n, 2)`` float64 ``(x, y)`` cell centres of an ``n x n`` grid over [0, 1]."""
    n = int(points_per_side)
    offset = 1.0 / (2 * n)
    side = np.linspace(offset, 1.0 - offset, n)
    xx, yy = np.meshgrid(side, side)
    return np.stack([xx.ravel(), yy.ravel()], axis=1)


def layer_points_per_side(points_per_side: int, layer: int, downscale: int) -> int:
    """Points per side on crop layer ``layer`` (at least 1)."""
    return max(1, int(points_per_side / downscale**layer))


def crop_boxes(
    shape: tuple[int, int], n_layers: int, overlap_ratio: float
) -> list[tuple[Box, int]]:
    """The crops to run on: the whole plane (layer 0), then ``2**i x 2**i`` crops per layer.

    Neighbouring crops of layer ``i`` overlap by ``overlap_ratio * min(rows, cols) * 2 / 2**i``
    pixels, as in SAM's generator.

    Returns
    -------
    list of (Box, int)
        Each crop ``(r0, c0, r1, c1)`` with its layer.
    """
    rows, cols = int(shape[0]), int(shape[1])
    out: list[tuple[Box, int]] = [((0, 0, rows, cols), 0)]
    short = min(rows, cols)
    for layer in range(1, n_layers + 1):
        per_side = 2**layer
        overlap = int(overlap_ratio * short * (2 / per_side))
        crop_h = math.ceil((overlap * (per_side - 1) + rows) / per_side)
        crop_w = math.ceil((overlap * (per_side - 1) + cols) / per_side)
        for i in range(per_side):
            r0 = int((crop_h - overlap) * i)
            for j in range(per_side):
                c0 = int((crop_w - overlap) * j)
                out.append(((r0, c0, min(r0 + crop_h, rows), min(c0 + crop_w, cols)), layer))
    return out
