"""The checkable computations inside the test graphs.

Encoders: the image's brightness ``I`` in [0, 1] (mean of RGB / 255), resampled to the feature
grids and written into channel 0 of each feature map (other channels are zero).

Toy SAM head (clicks and boxes), evaluated on the ``L x L`` mask grid whose cell centres sit at
``((j + 0.5) * S / L)`` model-input pixels:

* ``A = 20 * (I - 0.3)``: bright pixels are candidates;
* ``P_k = max(R_k - d_pos, inside_box)``: within radius ``R_k`` of a positive click, or inside a
  box (``inside_box`` is the signed distance to the box edges, positive inside);
* ``N = d_neg - R_neg``: pixels within ``R_neg`` of a negative click are removed;
* ``logits_k = min(A, P_k, N)`` and, with a mask prompt, ``min(logits_k, mask_input + 5)``.

So a click on a blob gives that blob (blobs further apart than ``R``), a negative click cuts a
disc out of it, and a box gives the bright pixels inside it. Radii are fractions of ``S``
(:data:`RADII`), predicted IoUs are constants (:data:`IOUS`) with the middle multimask output best,
and the object score is ``clip(max(logits of the single-mask token), -5, 5)``.
"""

from __future__ import annotations

import numpy as np

from .builder import GraphBuilder

#: Radii (fractions of the input size S) of the single-mask token and the three multimask tokens.
RADII = (0.15, 0.05, 0.15, 0.4)
#: Predicted IoU of the single-mask token and the three multimask tokens.
IOUS = (0.8, 0.6, 0.9, 0.7)
#: Radius of the disc a negative click removes (fraction of S).
NEG_RADIUS = 0.06
#: Brightness above which a pixel can belong to an object.
BRIGHT = 0.3
FAR = 1.0e4
#: How far the toy logits drop when a prompt reaches the head without a label -1 point.
PAD_SHIFT = 6.0


def grid_centres(size: int, grid: int) -> np.ndarray:
    """``(grid*grid, 2)`` float32 (x, y) centres of a ``grid x grid`` raster over ``size`` px."""
    c = (np.arange(grid, dtype=np.float32) + 0.5) * (size / grid)
    yy, xx = np.meshgrid(c, c, indexing="ij")
    return np.stack([xx.ravel(), yy.ravel()], axis=1).astype(np.float32)


def gray01_from_uint8_chw(b: GraphBuilder, image: str) -> str:
    """``[3,S,S]`` uint8 -> ``[1,1,S,S]`` float brightness in [0, 1]."""
    x = b.Cast(image, to=1)
    x = b.ReduceMean(x, b.const([0], "int64"), keepdims=1)  # [1,S,S]
    x = b.Unsqueeze(x, b.const([0], "int64"))
    return b.Div(x, b.const(255.0))


def gray01_from_normalised(b: GraphBuilder, pixel_values: str, fp16: bool = False) -> str:
    """``[1,3,S,S]`` float in [-1, 1] (mean = std = 0.5) -> ``[1,1,S,S]`` float in [0, 1]."""
    x = b.Cast(pixel_values, to=1) if fp16 else pixel_values
    x = b.ReduceMean(x, b.const([1], "int64"), keepdims=1)
    return b.Mul(b.Add(x, b.const(1.0)), b.const(0.5))


def feature_map(b: GraphBuilder, gray: str, size: int, channels: int) -> str:
    """Brightness resampled to ``size x size`` in channel 0 of a ``[1,channels,size,size]`` map."""
    return b.pad_channels(b.resize_to(gray, (size, size), (1, 1)), channels)


def brightness_flat(b: GraphBuilder, feature: str, grid: int) -> str:
    """Channel 0 of a ``[1,C,L,L]`` feature map as a flat ``[L*L]`` vector."""
    ch0 = b.Slice(feature, b.const([0], "int64"), b.const([1], "int64"), b.const([1], "int64"))
    return b.Reshape(ch0, b.const([grid * grid], "int64"))


def pad_prompt(b: GraphBuilder, points: str, labels: str) -> tuple[str, str]:
    """Append SAM's padding point ``(0, 0)`` with label -1 to ``[N, 2]`` points, ``[N]`` labels."""
    return (b.Concat(points, b.const([[0.0, 0.0]]), axis=0),
            b.Concat(labels, b.const([-1.0]), axis=0))


def toy_sam_head(
    b: GraphBuilder,
    brightness: str,
    points: str,
    labels: str,
    size: int,
    grid: int,
    boxes: str | None = None,
    mask_input: str | None = None,
    has_mask: str | None = None,
    tokens: tuple[int, ...] = (0, 1, 2, 3),
    needs_padding: bool = False,
) -> tuple[str, str, str]:
    """Add the toy SAM head.

    Parameters
    ----------
    brightness : str
        ``[L*L]`` float brightness on the mask grid.
    points, labels : str
        ``[N, 2]`` float (x, y) model-input pixels and ``[N]`` float labels (1, 0, 2, 3, -1).
        Boxes given as label-2/3 point pairs are read from here when ``boxes`` is None.
    boxes : str, optional
        ``[B, 4]`` float x0, y0, x1, y1 in model-input pixels.
    mask_input, has_mask : str, optional
        ``[L*L]`` float mask prompt logits and a ``[1]`` float 0/1 flag.
    tokens : tuple of int
        Which of the four tokens (0 single-mask, 1-3 multimask) to output, in order.
    needs_padding : bool
        Lower the logits by :data:`PAD_SHIFT` when no label -1 point is among ``labels``, as
        SAM's masks change without the prompt encoder's padding point.

    Returns
    -------
    tuple of str
        ``logits [K, L*L]``, ``iou [K]``, ``object_score [1]`` (from token 0).
    """
    grid_xy = b.const(grid_centres(size, grid))  # [G,2]
    # A sentinel point far away with label -1 keeps every reduction non-empty.
    pts = b.Concat(points, b.const([[-FAR, -FAR]]), axis=0)
    lab = b.Concat(labels, b.const([-1.0]), axis=0)
    diff = b.Sub(
        b.Unsqueeze(pts, b.const([1], "int64")), b.Unsqueeze(grid_xy, b.const([0], "int64"))
    )
    dist = b.Sqrt(b.ReduceSum(b.Mul(diff, diff), b.const([2], "int64"), keepdims=0))  # [N,G]

    def masked_min(label_value: float) -> str:
        sel = b.Cast(b.Equal(lab, b.const([label_value])), to=1)  # [N]
        penalty = b.Mul(b.Sub(b.const(1.0), sel), b.const(FAR))
        shifted = b.Add(dist, b.Unsqueeze(penalty, b.const([1], "int64")))
        return b.ReduceMin(shifted, b.const([0], "int64"), keepdims=0)  # [G]

    d_pos = masked_min(1.0)
    d_neg = masked_min(0.0)
    gx = b.Slice(grid_xy, b.const([0], "int64"), b.const([1], "int64"), b.const([1], "int64"))
    gy = b.Slice(grid_xy, b.const([1], "int64"), b.const([2], "int64"), b.const([1], "int64"))
    gx, gy = b.Transpose(gx, perm=[1, 0]), b.Transpose(gy, perm=[1, 0])  # [1,G]
    if boxes is None:
        # TL = the label-2 point, BR = the label-3 point (one box).
        def corner(label_value: float) -> str:
            sel = b.Cast(b.Equal(lab, b.const([label_value])), to=1)
            return b.ReduceSum(
                b.Mul(pts, b.Unsqueeze(sel, b.const([1], "int64"))),
                b.const([0], "int64"), keepdims=1,
            )  # [1,2]

        has_box = b.ReduceMax(b.Cast(b.Equal(lab, b.const([2.0])), to=1), keepdims=1)  # [1]
        box = b.Concat(corner(2.0), corner(3.0), axis=1)  # [1,4]
        box_pen = b.Mul(b.Sub(b.const(1.0), has_box), b.const(-FAR))
    else:
        box = b.Concat(boxes, b.const([[-FAR, -FAR, -FAR + 1, -FAR + 1]]), axis=0)
        box_pen = b.const([0.0])

    def col(i: int) -> str:
        return b.Slice(box, b.const([i], "int64"), b.const([i + 1], "int64"), b.const([1], "int64"))

    x0, y0, x1, y1 = (col(i) for i in range(4))  # [B,1]
    inside = b.Min(b.Min(b.Sub(gx, x0), b.Sub(x1, gx)), b.Min(b.Sub(gy, y0), b.Sub(y1, gy)))
    inside = b.Add(b.ReduceMax(inside, b.const([0], "int64"), keepdims=0), box_pen)  # [G]

    bright = b.Mul(b.Sub(brightness, b.const(BRIGHT)), b.const(20.0))
    neg = b.Sub(d_neg, b.const(NEG_RADIUS * size))
    per_token = []
    for t in tokens:
        p = b.Max(b.Sub(b.const(RADII[t] * size), d_pos), inside)
        logit = b.Min(b.Min(bright, p), neg)
        if mask_input is not None:
            capped = b.Min(logit, b.Add(mask_input, b.const(5.0)))
            # logit + has_mask * (capped - logit)
            logit = b.Add(logit, b.Mul(has_mask, b.Sub(capped, logit)))
        per_token.append(b.Unsqueeze(logit, b.const([0], "int64")))
    logits = b.Concat(*per_token, axis=0) if len(per_token) > 1 else per_token[0]
    if needs_padding:
        has_pad = b.ReduceMax(b.Cast(b.Equal(labels, b.const([-1.0])), to=1),
                              b.const([0], "int64"), keepdims=1)
        logits = b.Sub(logits, b.Mul(b.Sub(b.const(1.0), has_pad), b.const(PAD_SHIFT)))
    iou = b.const([IOUS[t] for t in tokens])
    first = b.Slice(logits, b.const([0], "int64"), b.const([1], "int64"), b.const([0], "int64"))
    obj = b.Clip(b.ReduceMax(first, keepdims=0), b.const(-5.0), b.const(5.0))
    obj = b.Reshape(obj, b.const([1], "int64"))
    return logits, iou, obj
