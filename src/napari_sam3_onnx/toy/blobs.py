"""The toy model's blob finding: one centre per bright blob and the pixels each centre claims.

Shared by the toy's concept detector (:func:`~.bundle.blob_queries`: one query per blob)
and its SAM head (:func:`~.head.blob_refine`: a click selects the whole blob it is in).
"""

from __future__ import annotations

import numpy as np

from .builder import GraphBuilder
from .concepts import FAR, ints

#: Queries (instances) the detector can return per slice.
QUERIES = 16
#: Blob finding on the L x L mask grid, as fractions of L: smoothing window, the radius within
#: which a blob has one centre, the radius a centre claims pixels within; least on-coverage.
SMOOTH, SEPARATION, REACH, MIN_COVER = 0.09, 0.13, 0.16, 0.35


def blob_partition(b: GraphBuilder, brightness: str, level: str, size: int
                   ) -> tuple[str, str, str, str, str]:
    """The bright blobs of a plane: one centre per blob and the pixels each centre claims.

    ``on`` = brightness > ``level``; its local coverage (box mean over ``SMOOTH * L`` pixels,
    twice) peaks once near each blob's centre. Peaks (the maximum within ``SEPARATION * L``,
    coverage >= :data:`MIN_COVER`) are ranked by coverage and the best :data:`QUERIES` kept;
    each claims the pixels nearer to it than to any other peak, within ``REACH * L``.

    Parameters
    ----------
    brightness : str
        ``[L*L]`` float brightness on the mask grid (row-major).
    level : str
        ``[1]`` float brightness level.
    size : int
        ``L``.

    Returns
    -------
    tuple of str
        ``member [Q, L*L]`` float 0/1, ``cover [Q]`` float (0 for no peak), ``live [Q]`` bool,
        and the peaks' grid ``column [Q]`` and ``row [Q]`` (float, cell units).
    """
    n, q = size * size, QUERIES
    on = b.Cast(b.Greater(brightness, level), to=1)
    grid = b.Reshape(on, ints(b, 1, 1, size, size))
    k = max(3, round(SMOOTH * size) | 1)
    for _ in range(2):
        grid = b.AveragePool(grid, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[1, 1],
                             count_include_pad=1)
    # A small ramp breaks ties on a plateau, so a flat blob still has one peak (its steps stay
    # well above float32 resolution near 1; the row and column rates are incommensurate).
    r_, c_ = np.mgrid[0:size, 0:size].astype(np.float32) / size
    ramp = (1e-3 * c_ + 2.7e-3 * r_).reshape(1, 1, size, size)
    cover = b.Add(grid, b.const(ramp))
    r = max(1, round(SEPARATION * size))
    top = b.MaxPool(cover, kernel_shape=[2 * r + 1] * 2, pads=[r] * 4, strides=[1, 1])
    peak = b.And(b.GreaterOrEqual(cover, top), b.GreaterOrEqual(cover, b.const(MIN_COVER)))
    score = b.Reshape(b.Mul(b.Cast(peak, to=1), cover), ints(b, n))
    values, index = b.op_n("TopK", [score, ints(b, q)], 2, axis=0, largest=1, sorted=1)
    live = b.Greater(values, b.const(0.0))  # [Q]
    fidx = b.Cast(index, to=1)
    qy = b.Floor(b.Div(fidx, b.const(float(size))))
    qx = b.Sub(fidx, b.Mul(qy, b.const(float(size))))
    j = np.arange(n, dtype=np.float32)
    gy, gx = b.const((j // size)[None]), b.const((j % size)[None])  # [1, N]
    dx = b.Sub(gx, b.Unsqueeze(qx, ints(b, 1)))
    dy = b.Sub(gy, b.Unsqueeze(qy, ints(b, 1)))
    dead = b.Mul(b.Cast(b.Not(live), to=1), b.const(FAR))
    d2 = b.Add(b.Add(b.Mul(dx, dx), b.Mul(dy, dy)), b.Unsqueeze(dead, ints(b, 1)))  # [Q, N]
    nearest = b.ArgMin(d2, axis=0, keepdims=1)  # [1, N]
    mine = b.Equal(nearest, b.const(np.arange(q)[:, None], "int64"))
    reach = float(REACH * size) ** 2
    member = b.Cast(b.And(mine, b.LessOrEqual(d2, b.const(reach))), to=1)
    return member, values, live, qx, qy
