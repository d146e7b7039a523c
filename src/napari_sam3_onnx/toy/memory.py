"""Checkable semantics of the test graphs with SAM video memory (pagarcia and jax-video sets).

Sizes follow :class:`~napari_sam3_onnx.toy.geometry.TestGeometry` (input ``S = 14 g``, masks
``L = 4 g``, memory on the ``g x g`` grid). The top-level feature has ``C >= 8`` channels and the
memory ``C_m >= 4`` (:data:`MEMORY_SMALL`: C = 8, C_m = 4, so a pointer is two memory tokens).
Encoders write the image brightness ``I`` in [0, 1] into channel 0 of every level (other channels
zero), as :mod:`~napari_sam3_onnx.toy.semantics` does.

Top-level channels (raw feature ``F``, ``F + no_mem_embed``, or the memory-attention output)::

    0 brightness   1 bias     2 remembered x   3 remembered y   4 memory flag (0/1)
    5 remembered brightness   6 position-encoding channel 0   7 sum of pointer tokens' channel 0

The test ``no_mem_embed`` is :data:`NO_MEM_BIAS` in channel 1 only.

**Decoder** (:func:`tracker_head`): brightness on the mask grid ``B = ch0(feats level 0) +
resize(ch1(top))``; the toy SAM head (:func:`~napari_sam3_onnx.toy.semantics.toy_sam_head`)
on ``B`` gives four tokens; each is then ``max(token, mem)`` with the memory prompt
``mem = min(GAIN (B - BRIGHT), R_MEM S - |p - (x_m, y_m)|) - BIG (1 - flag)``, where ``(x_m,
y_m)`` and ``flag`` are the grid means of channels 2, 3, 4. So a prompted slice decodes exactly as
the toy head (with ``B = I + no_mem bias``) and a tracked slice with no points segments the bright
pixels within ``R_MEM S`` of the remembered centroid. Object score = ``clip(max token 0, -5,
5)``; if it is <= 0 all logits become :data:`NO_OBJ` (SAM's in-graph occlusion gating). The object
pointer is the object score in all ``C`` channels.

**Memory encoder** (:func:`memory_encoder_core`): mask ``m`` = ``logits > 0`` if the mask is from
points, else ``sigmoid(logits)``, on the ``S x S`` input. Features (each broadcast over the grid):
channel 0 = mask-weighted mean of ``ch0 + ch1`` of the feature it is given (weights = the mask's
coverage of each grid cell), 1 / 2 = centroid ``x`` / ``y`` of ``m`` in model-input pixels (pixel
centres at ``j + 0.5``), 3 = presence ``+1`` if ``sum(m) >= 1`` (and the object score > 0 where
the graph takes one) else ``-1``. Position encoding: channel 0 / 1 = the grid cell's centre
``x`` / ``y`` in pixels, other channels 0.

**Memory attention** (:func:`attention_core`): among the memories with presence > 0 it takes the
one with the lowest temporal row (the most recent: row 0 = previous slice, row ``num_maskmem - 1``
= prompted slice) and writes its centroid (channels 2, 3), flag 1 (channel 4) and brightness
(channel 5); with no such memory these are 0. Channels 0, 1 pass the current feature through,
channel 6 is channel 0 of the current position encoding (so a transposed token order shows),
channel 7 the sum of channel 0 over all pointer tokens (a 256-d pointer is ``C / C_m`` tokens:
``ptr[j C_m:(j+1) C_m]``). The pagarcia graph reads rows from ``memory_mask_tpos_idx``; the
jax graph from channel 3 of the spatial memory's position embedding, whose temporal table row
``r`` is written by the builder with channel 3 = ``r`` (:func:`temporal_table`).
"""

from __future__ import annotations

import numpy as np

from .builder import GraphBuilder
from .geometry import TestGeometry
from .semantics import (  # noqa: F401 - pad_prompt is used by the tracker builders
    BRIGHT,
    IOUS,
    PAD_SHIFT,
    brightness_flat,
    grid_centres,
    pad_prompt,
    toy_sam_head,
)

#: Geometry of the memory test sets: 112-px input, 32-px masks, 8 x 8 grid, C = 8.
MEMORY_SMALL = TestGeometry(grid=8, channels=(2, 3, 8))
#: SAM 3's real input / mask / grid sizes with few channels.
MEMORY_FULL = TestGeometry(grid=72, channels=(2, 2, 8))
#: Memory channels of the test sets (SAM 3: 64).
MEM_CHANNELS = 4
#: Top-level channels the semantics use.
TOP_CHANNELS = 8
#: toy_sam_head's brightness gain: logits = GAIN * (B - BRIGHT) where brightness decides.
GAIN = 20.0
#: Radius (fraction of S) around the remembered centroid that a tracked slice segments.
R_MEM = 0.2
#: Channel-1 value of the test no_mem_embed.
NO_MEM_BIAS = 0.1
#: SAM's logit for "object absent".
NO_OBJ = -1024.0
BIG = 1.0e6
EPS = 1.0e-6


def check_geometry(geometry: TestGeometry, mem_channels: int = MEM_CHANNELS) -> None:
    """Raise ValueError if the channel counts cannot carry these semantics."""
    c = geometry.channels[2]
    if c < TOP_CHANNELS or mem_channels < 4 or c % mem_channels:
        raise ValueError(f"need C >= {TOP_CHANNELS}, C_m >= 4 and C_m | C; got {c}, {mem_channels}")


def channel(b: GraphBuilder, x: str, i: int) -> str:
    """Channel ``i`` of an NCHW tensor, kept as ``[N,1,H,W]``."""
    return b.Slice(x, b.const([i], "int64"), b.const([i + 1], "int64"), b.const([1], "int64"))


def column(b: GraphBuilder, x: str, i: int) -> str:
    """Column ``i`` of a ``[K, M]`` tensor as ``[K, 1]``."""
    return channel(b, x, i)


def broadcast(b: GraphBuilder, x: str, grid: int) -> str:
    """Any one-element tensor -> ``[1,1,grid,grid]``."""
    x = b.Reshape(x, b.const([1, 1, 1, 1], "int64"))
    return b.Expand(x, b.const([1, 1, grid, grid], "int64"))


def stack_channels(b: GraphBuilder, maps: list[str], channels: int) -> str:
    """Concatenate ``[1,1,g,g]`` maps along channels and zero-pad to ``channels``."""
    x = b.Concat(*maps, axis=1)
    if channels > len(maps):
        pads = b.const([0, 0, 0, 0, 0, channels - len(maps), 0, 0], "int64")
        x = b.op("Pad", [x, pads], mode="constant")
    return x


def cell_centres_map(size: int, grid: int, channels: int) -> np.ndarray:
    """``(1, channels, grid, grid)`` float32: cell-centre x (ch 0) and y (ch 1) in pixels."""
    c = (np.arange(grid, dtype=np.float32) + 0.5) * (size / grid)
    out = np.zeros((1, channels, grid, grid), np.float32)
    out[0, 0] = c[None, :]
    out[0, 1] = c[:, None]
    return out


def temporal_table(rows: int, mem_channels: int) -> np.ndarray:
    """``(rows, C_m)`` test temporal encoding: channel 3 = row index, small ramps elsewhere."""
    t = 0.01 * np.outer(np.arange(1, rows + 1), np.arange(1, mem_channels + 1))
    t[:, 3] = np.arange(rows)
    return t.astype(np.float32)


def grid_mean(b: GraphBuilder, top: str, i: int) -> str:
    """Mean of channel ``i`` of ``[1,C,g,g]`` over the grid, as ``[1]``."""
    m = b.ReduceMean(channel(b, top, i), b.const([1, 2, 3], "int64"), keepdims=0)
    return b.Reshape(m, b.const([1], "int64"))


def tracker_head(
    b: GraphBuilder, hr0: str, top: str, points: str, labels: str, geometry: TestGeometry,
    tokens: tuple[int, ...], mask_input: str | None = None, needs_padding: bool = False,
) -> tuple[str, str, str, str]:
    """Toy SAM head + memory prompt + occlusion gating (see the module docstring).

    With ``needs_padding`` the logits drop by :data:`PAD_SHIFT` when no label -1 point reaches
    the head, as SAM's output changes without its padding point.

    Returns ``logits [K, L*L]`` of ``tokens``, ``iou [K]``, ``object_score [1]``, ``pointer [C]``.
    """
    s, l_, c = geometry.input_size, geometry.mask_size, geometry.channels[2]
    bias = b.Reshape(b.resize_to(channel(b, top, 1), (l_, l_), (1, 1)),
                     b.const([l_ * l_], "int64"))
    bright = b.Add(brightness_flat(b, hr0, l_), bias)
    has = b.const([1.0]) if mask_input is not None else None
    toy, _, _ = toy_sam_head(b, bright, points, labels, s, l_, mask_input=mask_input,
                             has_mask=has, tokens=(0, 1, 2, 3))
    cx, cy, flag = (grid_mean(b, top, i) for i in (2, 3, 4))
    grid_xy = b.const(grid_centres(s, l_))
    dx = b.Sub(b.Reshape(column(b, grid_xy, 0), b.const([-1], "int64")), cx)
    dy = b.Sub(b.Reshape(column(b, grid_xy, 1), b.const([-1], "int64")), cy)
    dist = b.Sqrt(b.Add(b.Mul(dx, dx), b.Mul(dy, dy)))
    near = b.Sub(b.const(R_MEM * s), dist)
    memlog = b.Min(b.Mul(b.Sub(bright, b.const(BRIGHT)), b.const(GAIN)), near)
    memlog = b.Sub(memlog, b.Mul(b.Sub(b.const(1.0), flag), b.const(BIG)))
    logits = b.Max(toy, b.Unsqueeze(memlog, b.const([0], "int64")))
    if needs_padding:
        has_pad = b.ReduceMax(b.Cast(b.Equal(labels, b.const([-1.0])), to=1),
                              b.const([0], "int64"), keepdims=1)
        logits = b.Sub(logits, b.Mul(b.Sub(b.const(1.0), has_pad), b.const(PAD_SHIFT)))
    first = b.Slice(logits, b.const([0], "int64"), b.const([1], "int64"), b.const([0], "int64"))
    obj = b.Reshape(b.Clip(b.ReduceMax(first, keepdims=0), b.const(-5.0), b.const(5.0)),
                    b.const([1], "int64"))
    gated = b.Where(b.Greater(obj, b.const([0.0])), logits, b.const(NO_OBJ))
    sel = b.Gather(gated, b.const(list(tokens), "int64"), axis=0)
    iou = b.const([IOUS[t] for t in tokens])
    ptr = b.Expand(obj, b.const([c], "int64"))
    return sel, iou, obj, ptr


def memory_encoder_core(
    b: GraphBuilder, mask_hr: str, feature: str, from_points: str, geometry: TestGeometry,
    score: str | None = None, mem_channels: int = MEM_CHANNELS,
) -> tuple[str, str]:
    """Toy memory encoder (module docstring).

    ``mask_hr [1,1,S,S]`` logits, ``feature [1,C,g,g]``, ``from_points [1]`` float 0/1 and an
    optional object score ``[1]`` -> features and position encoding ``[1,C_m,g,g]``.
    """
    s, g = geometry.input_size, geometry.grid
    binary = b.Cast(b.Greater(mask_hr, b.const(0.0)), to=1)
    m = b.Add(b.Mul(from_points, binary),
              b.Mul(b.Sub(b.const(1.0), from_points), b.Sigmoid(mask_hr)))
    centres = np.arange(s, dtype=np.float32) + 0.5
    area = b.ReduceSum(m, keepdims=1)
    den = b.Max(area, b.const(EPS))
    cx = b.Div(b.ReduceSum(b.Mul(m, b.const(centres.reshape(1, 1, 1, s))), keepdims=1), den)
    cy = b.Div(b.ReduceSum(b.Mul(m, b.const(centres.reshape(1, 1, s, 1))), keepdims=1), den)
    k = s // g
    cover = b.AveragePool(m, kernel_shape=[k, k], strides=[k, k])
    value = b.Add(channel(b, feature, 0), channel(b, feature, 1))
    bright = b.Div(b.ReduceSum(b.Mul(cover, value), keepdims=1),
                   b.Max(b.ReduceSum(cover, keepdims=1), b.const(EPS)))
    present = b.Cast(b.GreaterOrEqual(area, b.const(1.0)), to=1)
    if score is not None:
        present = b.Mul(present, b.Cast(b.Greater(score, b.const(0.0)), to=1))
    presence = b.Sub(b.Mul(present, b.const(2.0)), b.const(1.0))
    feats = stack_channels(b, [broadcast(b, v, g) for v in (bright, cx, cy, presence)],
                           mem_channels)
    pos = b.const(cell_centres_map(s, g, mem_channels))
    return feats, pos


def attention_core(
    b: GraphBuilder, current: str, current_pos: str, mem_values: str, rows: str,
    ptr_tokens: str, geometry: TestGeometry,
) -> str:
    """Toy memory attention (module docstring): the fused feature ``[1,C,g,g]``.

    Inputs: the current feature and position map ``[1,C,g,g]``, per-memory values ``[k,C_m]``
    (grid means), temporal rows ``[k,1]`` float and pointer tokens ``[n,C_m]``.
    """
    g, c = geometry.grid, geometry.channels[2]
    present = b.Cast(b.Greater(column(b, mem_values, 3), b.const(0.0)), to=1)  # [k,1]
    key = b.Mul(present, b.Sub(b.const(1000.0), rows))
    idx = b.Reshape(b.ArgMax(key, axis=0, keepdims=1), b.const([1], "int64"))
    chosen = b.Gather(mem_values, idx, axis=0)  # [1,C_m]
    flag = b.ReduceMax(present, keepdims=1)
    bright_m, cx, cy = (b.Mul(column(b, chosen, i), flag) for i in (0, 1, 2))
    ptr_sum = b.ReduceSum(column(b, ptr_tokens, 0), keepdims=1)
    maps = [channel(b, current, 0), channel(b, current, 1), broadcast(b, cx, g),
            broadcast(b, cy, g), broadcast(b, flag, g), broadcast(b, bright_m, g),
            channel(b, current_pos, 0), broadcast(b, ptr_sum, g)]
    return stack_channels(b, maps, c)


def tokens_to_map(b: GraphBuilder, tokens: str, channels: int, grid: int) -> str:
    """``[T,1,C]`` (or ``[T,C]``) token-major -> ``[1,C,g,g]``."""
    t = b.Reshape(tokens, b.const([grid * grid, channels], "int64"))
    return b.Reshape(b.Transpose(t, perm=[1, 0]), b.const([1, channels, grid, grid], "int64"))


def map_to_tokens(b: GraphBuilder, x: str, channels: int, grid: int) -> str:
    """``[1,C,g,g]`` -> ``[T,1,C]`` token-major (row-major over ``(y, x)``)."""
    t = b.Transpose(b.Reshape(x, b.const([channels, grid * grid], "int64")), perm=[1, 0])
    return b.Unsqueeze(t, b.const([1], "int64"))
