"""Toy language encoders and a toy concept detector shared by the concept-layout test graphs.

Everything is computed on the detector's ``L x L`` mask grid (``L`` = the 4x feature level), from
the brightness ``I`` in [0, 1] that the test encoders write into channel 0 of every feature map
(:mod:`napari_sam3_onnx.toy.semantics`).

Text. A token id maps through :func:`level_table` to a brightness *level*: ``TOKEN_ANY`` (and any
id not listed) -> ``0.25``, ``TOKEN_BRIGHT`` -> ``0.7``, ``TOKEN_NOTHING`` -> ``0.999``,
``TOKEN_FAINT`` -> ``0.2``, start and end tokens -> ``0``, and id ``0`` (upstream padding) ->
``0.99``. Language encoders write the level of every token into channel 0 of their text
features. The detector's level is the maximum over **real** tokens (padding excluded through the
text mask); so a wrongly built mask either lets the ``0.99`` of 0-padding in (nothing is found)
or keeps only padding (level 0: everything is found).

Pixels. Pixel logit ``a = clip(GAIN * (I - level), -20, 20)``; a pixel is *on* when ``a > 0``.

Queries. The grid is cut into ``QUERY_SIDE x QUERY_SIDE`` cells, query ``i`` = cell
``(i // QUERY_SIDE, i % QUERY_SIDE)`` (row-major). Its mask logits are the pixel logits inside
its cell and ``-20`` elsewhere; its box is the bounding box of its on pixels (pixel edges,
normalised x0, y0, x1, y1; zeros when empty); its logit is
``clip(SCORE_GAIN * f - SCORE_BIAS, -8, 8)`` with ``f`` the on fraction of the cell (an empty
cell: -2; a cell a third full: 1.3).

Exemplars. Each **live** slot ``k`` (box ``cx, cy, w, h`` normalised) has a reference brightness
``m_k`` = the brightest mask pixel whose centre lies inside the box. With ``p_i`` the brightest
pixel of query ``i``'s cell, a positive exemplar (label 1) caps the query logit at
``GAIN * (BAND - |p_i - m_k|)`` (only cells in the exemplar's brightness band can fire), a
negative one (label 0) at ``GAIN * (|p_i - m_k| - BAND)`` (cells in its band cannot). A padded
slot is inert.

Presence. ``max(query logits) - 1`` (so presence is **not** folded into the logits), minus
``50 x`` the mean absolute error of the position-encoding input against :func:`position_pattern`
where a graph takes one: a detector fed a wrong or missing position encoding finds nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .builder import GraphBuilder

VOCAB = 49408
CONTEXT = 32
SOT, EOT = 49406, 49407
#: Token ids with a documented level; every other id behaves like ``TOKEN_ANY``.
TOKEN_ANY, TOKEN_BRIGHT, TOKEN_NOTHING = 2000, 4000, 3000
#: The shipped toy's words for blobs (:mod:`~napari_sam3_onnx.toy.bundle`): level 0.2,
#: so dim, out-of-focus blobs count too.
TOKEN_FAINT = 5000
LEVELS = {TOKEN_ANY: 0.25, TOKEN_BRIGHT: 0.7, TOKEN_NOTHING: 0.999, TOKEN_FAINT: 0.2}
DEFAULT_LEVEL = 0.25
PAD_ZERO_LEVEL = 0.99
GAIN, BAND = 20.0, 0.12
SCORE_GAIN, SCORE_BIAS = 10.0, 2.0
QUERY_SIDE = 4
FAR = 1.0e4
I64 = "int64"


def level_table() -> np.ndarray:
    """``(VOCAB,)`` float32 brightness level of every token id."""
    table = np.full(VOCAB, DEFAULT_LEVEL, np.float32)
    table[[SOT, EOT]] = 0.0
    table[0] = PAD_ZERO_LEVEL
    for token, level in LEVELS.items():
        table[token] = level
    return table


def position_pattern(size: int) -> np.ndarray:
    """``(size, size)`` float32 constant "position encoding": ``(col + 2 row) / (3 size)``."""
    r, c = np.mgrid[0:size, 0:size].astype(np.float32)
    return (c + 2.0 * r) / (3.0 * size)


def ints(b: GraphBuilder, *values: int) -> str:
    """An int64 constant vector."""
    return b.const(list(values), I64)


def channel0(b: GraphBuilder, x: str, axis: int) -> str:
    """Slice index 0 of ``axis`` (keeps the axis)."""
    return b.Slice(x, ints(b, 0), ints(b, 1), ints(b, axis))


def position_output(b: GraphBuilder, size: int, channels: int) -> str:
    """A constant ``[1, channels, size, size]`` map: :func:`position_pattern` in channel 0."""
    pattern = np.zeros((1, channels, size, size), np.float32)
    pattern[0, 0] = position_pattern(size)
    return b.Identity(b.const(pattern))


def position_penalty(b: GraphBuilder, pos: str, size: int) -> str:
    """``[1]``: 50 x mean |channel 0 of ``pos`` - :func:`position_pattern`|."""
    flat = b.Reshape(channel0(b, pos, 1), ints(b, size * size))
    err = b.Abs(b.Sub(flat, b.const(position_pattern(size).ravel())))
    return b.Mul(b.ReduceMean(err, keepdims=1), b.const([50.0]))


def token_levels(b: GraphBuilder, ids: str) -> str:
    """``[1, T]`` int64 ids -> ``[1, T]`` float levels (a Gather from :func:`level_table`)."""
    return b.Gather(b.const(level_table()), ids, axis=0)


def pad_last(b: GraphBuilder, x: str, rank: int, channels: int) -> str:
    """Zero-pad the last axis of a rank-``rank`` tensor with one entry to ``channels``."""
    if channels == 1:
        return x
    pads = [0] * (2 * rank)
    pads[2 * rank - 1] = channels - 1
    return b.Pad(x, ints(b, *pads), mode="constant")


def text_level(b: GraphBuilder, levels: str, valid: str) -> str:
    """``[1]`` level = max over real tokens; ``levels`` and ``valid`` (1.0 = token) are ``[T]``."""
    return b.Reshape(b.ReduceMax(b.Mul(levels, valid), keepdims=1), ints(b, 1))


def _grid(size: int) -> tuple[np.ndarray, ...]:
    j = np.arange(size, dtype=np.float32)
    yy, xx = np.meshgrid(j, j, indexing="ij")
    side = size // QUERY_SIDE
    cell = (yy // side) * QUERY_SIDE + (xx // side)
    return (xx.ravel()[None], yy.ravel()[None], cell.ravel()[None])


def toy_detector(
    b: GraphBuilder,
    brightness: str,
    level: str,
    size: int,
    exemplars: tuple[str, str, str] | None = None,
    penalty: str | None = None,
    queries: tuple[str, str] | None = None,
) -> dict[str, str]:
    """Add the toy detector (see the module docstring).

    Parameters
    ----------
    brightness : str
        ``[L*L]`` float brightness on the mask grid (row-major).
    level : str
        ``[1]`` float text level.
    size : int
        ``L``; must be a multiple of :data:`QUERY_SIDE`.
    exemplars : tuple of str, optional
        ``boxes [K, 4]`` float cxcywh normalised, ``labels [K]`` float (1 positive, 0 negative),
        ``padding [K]`` float (1 = padded slot).
    penalty : str, optional
        ``[1]`` float subtracted from the presence logit.
    queries : tuple of str, optional
        ``member [Q, L*L]`` (0/1: the pixels each query may claim) and ``logits [Q]`` (the
        query logits before the exemplar cap) to use instead of the cell grid
        (:mod:`~napari_sam3_onnx.toy.bundle` finds one query per blob).

    Returns
    -------
    dict of str
        ``pixel [L*L]``, ``on [Q, L*L]`` (0/1 per query), ``mask_logits [Q, L*L]``,
        ``logits [Q]``, ``boxes [Q, 4]`` xyxy normalised, ``presence [1]``, ``scores [Q]``.
    """
    q = QUERY_SIDE * QUERY_SIDE
    xx, yy, cell = _grid(size)
    gx, gy = b.const((xx + 0.5) / size), b.const((yy + 0.5) / size)  # [1,G] pixel centres
    pixel = b.Clip(b.Mul(b.Sub(brightness, level), b.const(GAIN)), b.const(-20.0), b.const(20.0))
    if queries is None:
        member = b.Cast(b.Equal(b.const(cell), b.const(np.arange(q, dtype=np.float32)[:, None])),
                        to=1)
    else:
        member = queries[0]
    on = b.Mul(member, b.Cast(b.Greater(pixel, b.const(0.0)), to=1))  # [Q,G]
    count = b.ReduceSum(on, ints(b, 1), keepdims=0)  # [Q]
    if queries is None:
        frac = b.Div(count, b.const(float((size // QUERY_SIDE) ** 2)))
        logits = b.Sub(b.Mul(frac, b.const(SCORE_GAIN)), b.const(SCORE_BIAS))
    else:
        logits = queries[1]
    if exemplars is not None:
        logits = b.Min(logits, _exemplar_term(b, brightness, member, gx, gy, *exemplars))
    logits = b.Clip(logits, b.const(-8.0), b.const(8.0))
    mask_logits = b.Add(b.Mul(member, pixel), b.Mul(b.Sub(b.const(1.0), member), b.const(-20.0)))
    off = b.Mul(b.Sub(b.const(1.0), on), b.const(FAR))
    x0 = b.ReduceMin(b.Add(b.const(xx / size), off), ints(b, 1), keepdims=1)
    y0 = b.ReduceMin(b.Add(b.const(yy / size), off), ints(b, 1), keepdims=1)
    x1 = b.ReduceMax(b.Sub(b.const((xx + 1) / size), off), ints(b, 1), keepdims=1)
    y1 = b.ReduceMax(b.Sub(b.const((yy + 1) / size), off), ints(b, 1), keepdims=1)
    has = b.Cast(b.Greater(b.Unsqueeze(count, ints(b, 1)), b.const(0.0)), to=1)  # [Q,1]
    box = b.Mul(b.Clip(b.Concat(x0, y0, x1, y1, axis=1), b.const(0.0), b.const(1.0)), has)
    presence = b.Sub(b.ReduceMax(logits, keepdims=1), b.const([1.0]))
    if penalty is not None:
        presence = b.Sub(presence, penalty)
    scores = b.Mul(b.Sigmoid(logits), b.Sigmoid(presence))
    return {"pixel": pixel, "on": on, "mask_logits": mask_logits, "logits": logits,
            "boxes": box, "presence": presence, "scores": scores}


def _peak(b: GraphBuilder, brightness: str, member: str) -> str:
    """``[R, 1]``: brightest pixel of each row of the 0/1 ``member [R, G]`` (``-FAR``: none)."""
    shifted = b.Add(b.Mul(member, brightness), b.Mul(b.Sub(member, b.const(1.0)), b.const(FAR)))
    return b.ReduceMax(shifted, ints(b, 1), keepdims=1)


def _exemplar_term(
    b: GraphBuilder, brightness: str, member: str, gx: str, gy: str,
    boxes: str, labels: str, padding: str,
) -> str:
    """``[Q]``: min over live exemplar slots of their per-query term (``+FAR`` if all padded)."""

    def col(i: int) -> str:
        return b.Slice(boxes, ints(b, i), ints(b, i + 1), ints(b, 1))  # [K,1]

    inside = b.And(
        b.LessOrEqual(b.Abs(b.Sub(gx, col(0))), b.Mul(col(2), b.const(0.5))),
        b.LessOrEqual(b.Abs(b.Sub(gy, col(1))), b.Mul(col(3), b.const(0.5))),
    )
    ref = _peak(b, brightness, b.Cast(inside, to=1))  # [K,1]
    peak = b.Transpose(_peak(b, brightness, member), perm=[1, 0])  # [1,Q]
    keep = b.Mul(b.Sub(b.const(BAND), b.Abs(b.Sub(peak, ref))), b.const(GAIN))  # [K,Q]
    lab = b.Unsqueeze(labels, ints(b, 1))
    term = b.Add(b.Mul(lab, keep), b.Mul(b.Sub(b.const(1.0), lab), b.Neg(keep)))
    pad = b.Unsqueeze(padding, ints(b, 1))  # a padded slot's term becomes +FAR
    term = b.Add(b.Mul(term, b.Sub(b.const(1.0), pad)), b.Mul(pad, b.const(FAR)))
    return b.ReduceMin(term, ints(b, 0), keepdims=0)


def xyxy_to_cxcywh(b: GraphBuilder, boxes: str) -> str:
    """``[Q, 4]`` xyxy -> cxcywh."""
    lo = b.Slice(boxes, ints(b, 0), ints(b, 2), ints(b, 1))
    hi = b.Slice(boxes, ints(b, 2), ints(b, 4), ints(b, 1))
    return b.Concat(b.Mul(b.Add(lo, hi), b.const(0.5)), b.Sub(hi, lo), axis=1)


def upstream_text_level(b: GraphBuilder, mask: str, features: str) -> str:
    """``[1]`` level from ``language_mask [1,T]`` bool (True = pad) + ``[T,1,C]`` features."""
    levels = b.Reshape(channel0(b, features, 2), ints(b, -1))
    valid = b.Reshape(b.Sub(b.const(1.0), b.Cast(mask, to=1)), ints(b, -1))
    return text_level(b, levels, valid)


def hf_text_level(b: GraphBuilder, features: str, mask: str) -> str:
    """``[1]`` level from ``[1,T,C]`` features + ``attention_mask [1,T]`` int64 (1 = token)."""
    levels = b.Reshape(channel0(b, features, 2), ints(b, -1))
    return text_level(b, levels, b.Reshape(b.Cast(mask, to=1), ints(b, -1)))


def build_upstream_language(
    path: Path, channels: tuple[int, int] = (4, 6), data: str | None = None
) -> Path:
    """Write an upstream-style toy language encoder to ``path``.

    ``tokens [1,32]`` int64 -> ``text_attention_mask [1,32]`` bool (True = pad, i.e. id 0),
    ``text_memory [32,1,C]`` and ``text_embeds [32,1,E]`` (levels in channel 0).
    """
    b = GraphBuilder("toy_language_encoder")
    tok = b.input("tokens", I64, [1, CONTEXT])
    b.output(b.Equal(tok, b.const([0], I64)), "text_attention_mask", "bool", [1, CONTEXT])
    seq = b.Transpose(b.Unsqueeze(token_levels(b, tok), ints(b, 2)), perm=[1, 0, 2])  # [T,1,1]
    for name, c in zip(("text_memory", "text_embeds"), channels, strict=True):
        b.output(pad_last(b, seq, 3, c), name, "float32", [CONTEXT, 1, c])
    return b.save(path, external_data=data)


def build_hf_text(path: Path, channels: int = 4, data: str | None = None) -> Path:
    """Write an HF-style toy text encoder to ``path``.

    ``input_ids [1,32]`` (pad 49407) + ``attention_mask [1,32]`` int64 (1 = token) ->
    ``text_features [1,32,C]``: level x attention mask in channel 0.
    """
    b = GraphBuilder("toy_hf_text_encoder")
    ids = b.input("input_ids", I64, [1, CONTEXT])
    mask = b.input("attention_mask", I64, [1, CONTEXT])
    feat = b.Mul(token_levels(b, ids), b.Cast(mask, to=1))
    feat = pad_last(b, b.Unsqueeze(feat, ints(b, 2)), 3, channels)
    b.output(feat, "text_features", "float32", [1, CONTEXT, channels])
    return b.save(path, external_data=data)
