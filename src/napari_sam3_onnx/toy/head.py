"""The toy model's prompt decoder outputs: whole blobs, crisp edges and honest quality scores.

The ``nso-sam3`` toy decoder (:func:`~napari_sam3_onnx.toy.memory.tracker_head`) keeps the
bright pixels within a token's radius of a positive click. That is enough for a user's clicks,
but SAM's automatic generator (a grid of single clicks, kept when the predicted IoU exceeds
0.88 and the stability score 0.95) needs what a trained decoder gives: a click near a blob
yields that blob and no piece of a neighbour, its edge does not move when the threshold moves by
one logit, and its predicted IoU says when the radius cut the blob. :func:`blob_refine` rewrites
the decoder's outputs so:

* **one blob per click**: the plane's blobs are :func:`~.bundle.blob_partition`'s (bright
  = brightness > :data:`~.semantics.BRIGHT`); a positive click selects the blob whose centre is
  nearest, if within ``REACH * L`` mask cells, and the masks keep only that blob's pixels (a
  click far from every blob selects nothing: an empty mask and a negative object score). With
  no positive click (a box, or memory alone) nothing changes;
* **crisp edges**: the logits are multiplied by :data:`GAIN`, so the stability score of a blob's
  mask is about 1 (the soft edge of a nucleus spans a few mask cells);
* **honest IoU**: token ``k``'s predicted IoU is ``BASE_IOUS[k]`` times the fraction of the
  largest token's mask it covers, so a mask the token's radius cut short scores below SAM's
  0.88 cut and the whole blob scores :data:`BASE_IOUS` (token 2 first, as before).
"""

from __future__ import annotations

from .blobs import REACH, blob_partition
from .builder import GraphBuilder
from .concepts import FAR, ints
from .geometry import TestGeometry
from .semantics import BRIGHT

#: Factor on the decoder's logits (the toy head's brightness edge is 20 logits per unit).
GAIN = 10.0
#: Predicted IoU of a token's mask when it holds the whole blob: single-mask token, then the
#: three multimask tokens (the middle one preferred when several are whole).
BASE_IOUS = (0.8, 0.92, 0.97, 0.94)


def clicked_blobs(b: GraphBuilder, brightness: str, points: str, labels: str,
                  geometry: TestGeometry) -> tuple[str, str]:
    """The blobs the positive clicks select, as a gate on the mask grid.

    Parameters
    ----------
    brightness : str
        ``[L*L]`` float brightness on the mask grid.
    points, labels : str
        ``[P, 2]`` float (x, y) model-input pixels and ``[P]`` float labels.

    Returns
    -------
    tuple of str
        ``gate [L*L]`` float (``+FAR`` on the selected blobs' pixels, ``-FAR`` elsewhere;
        ``+FAR`` everywhere without a positive click) and ``has_positive [1]`` bool.
    """
    size, s = geometry.mask_size, geometry.input_size
    member, _cover, live, qx, qy = blob_partition(b, brightness, b.const([BRIGHT]), size)
    scale = b.const([size / s])
    px = b.Sub(b.Mul(b.Slice(points, ints(b, 0), ints(b, 1), ints(b, 1)), scale),
               b.const(0.5))  # [P, 1] cell units
    py = b.Sub(b.Mul(b.Slice(points, ints(b, 1), ints(b, 2), ints(b, 1)), scale),
               b.const(0.5))
    dx = b.Sub(px, b.Unsqueeze(qx, ints(b, 0)))  # [P, Q]
    dy = b.Sub(py, b.Unsqueeze(qy, ints(b, 0)))
    dead = b.Mul(b.Cast(b.Not(live), to=1), b.const(FAR))
    d2 = b.Add(b.Add(b.Mul(dx, dx), b.Mul(dy, dy)), b.Unsqueeze(dead, ints(b, 0)))
    nearest = b.ArgMin(d2, axis=1, keepdims=0)  # [P]
    near = b.LessOrEqual(b.ReduceMin(d2, ints(b, 1), keepdims=0),
                         b.const(float(REACH * size) ** 2))
    positive = b.Equal(labels, b.const([1.0]))
    chosen = b.Cast(b.And(positive, near), to=1)  # [P]
    picked = b.Mul(b.Gather(member, nearest, axis=0), b.Unsqueeze(chosen, ints(b, 1)))
    blob = b.ReduceMax(picked, ints(b, 0), keepdims=0)  # [L*L]
    has_positive = b.Greater(b.ReduceMax(b.Cast(positive, to=1), ints(b, 0), keepdims=1),
                             b.const([0.5]))
    gate = b.Where(has_positive, b.Sub(b.Mul(blob, b.const(2 * FAR)), b.const(FAR)),
                   b.const([FAR]))
    return gate, has_positive


def blob_refine(b: GraphBuilder, logits: str, iou: str, obj: str, brightness: str,
                points: str, labels: str, geometry: TestGeometry) -> tuple[str, str, str]:
    """Rewrite the toy decoder's outputs (module docstring); a ``build_nso`` ``refine``.

    Parameters
    ----------
    logits : str
        ``[4, L*L]`` float logits of tokens 0-3.
    iou : str
        ``[4]`` float predicted IoUs (replaced).
    obj : str
        ``[1]`` float object-score logit.
    brightness, points, labels : str
        As :func:`clicked_blobs` takes them.

    Returns
    -------
    tuple of str
        ``logits [4, L*L]``, ``iou [4]``, ``object_score [1]``.
    """
    del iou
    gate, has_positive = clicked_blobs(b, brightness, points, labels, geometry)
    gated = b.Min(logits, b.Unsqueeze(gate, ints(b, 0)))
    area = b.ReduceSum(b.Cast(b.Greater(gated, b.const(0.0)), to=1), ints(b, 1), keepdims=0)
    whole = b.Max(b.ReduceMax(area, ints(b, 0), keepdims=1), b.const([1.0]))
    new_iou = b.Mul(b.const(list(BASE_IOUS)), b.Div(area, whole))
    first = b.Slice(gated, ints(b, 0), ints(b, 1), ints(b, 0))
    best = b.Reshape(b.Clip(b.ReduceMax(first, keepdims=0), b.const(-5.0), b.const(5.0)),
                     ints(b, 1))
    new_obj = b.Where(has_positive, b.Min(obj, best), obj)
    return b.Mul(gated, b.const(GAIN)), new_iou, new_obj
