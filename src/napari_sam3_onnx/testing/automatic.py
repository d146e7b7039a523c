"""Test graphs for automatic segmentation: the HF tracker-pair layout with known logit slopes.

The encoder is :func:`~.hf_tracker.build_hf_tracker`'s. The decoder computes the toy SAM head
(:func:`~.semantics.toy_sam_head`, multimask tokens 1-3) and then multiplies each token's logits
by its own ``slopes[k]`` and reports ``ious[k]`` as its predicted IoU. Near a mask's contour the
logits of token ``k`` change by ``slopes[k]`` per model-input pixel (the radius limit) or by
``20 * slopes[k]`` per unit of brightness (the bright-blob edge), so a small slope puts many
mask pixels within SAM's stability offset of the threshold and a large one almost none.
"""

from __future__ import annotations

from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat, toy_sam_head
from .hf_tracker import DECODER, build_hf_tracker


def build_sloped_tracker(
    folder: Path,
    geometry: TestGeometry = SMALL,
    slopes: tuple[float, float, float] = (10.0, 10.0, 10.0),
    ious: tuple[float, float, float] = (0.6, 0.9, 0.7),
) -> Path:
    """Write the HF tracker-pair graphs with the scaled decoder into ``folder``; return it."""
    folder = build_hf_tracker(folder, geometry)
    s, (l0, l1, l2), ch = geometry.input_size, geometry.levels, geometry.channels
    dec = GraphBuilder("hf_prompt_decoder_sloped")
    pts = dec.input("input_points", "float32", [1, 1, "num_points", 2])
    lab = dec.input("input_labels", "int64", [1, 1, "num_points"])
    box = dec.input("input_boxes", "float32", [1, "num_boxes", 4])
    e0 = dec.input("image_embeddings.0", "float32", [1, ch[0], l0, l0])
    dec.input("image_embeddings.1", "float32", [1, ch[1], l1, l1])
    dec.input("image_embeddings.2", "float32", [1, ch[2], l2, l2])
    points = dec.Reshape(pts, dec.const([-1, 2], "int64"))
    labels = dec.Cast(dec.Reshape(lab, dec.const([-1], "int64")), to=1)
    boxes = dec.Reshape(box, dec.const([-1, 4], "int64"))
    logits, _, obj = toy_sam_head(
        dec, brightness_flat(dec, e0, l0), points, labels, s, l0, boxes=boxes, tokens=(1, 2, 3)
    )
    scaled = dec.Mul(logits, dec.const([[float(v)] for v in slopes]))  # [3, L*L]
    dec.output(dec.const([[list(map(float, ious))]]), "iou_scores", "float32", [1, 1, 3])
    dec.output(dec.Reshape(scaled, dec.const([1, 1, 3, l0, l0], "int64")), "pred_masks",
               "float32", [1, 1, 3, l0, l0])
    dec.output(dec.Reshape(obj, dec.const([1, 1, 1], "int64")), "object_score_logits", "float32",
               [1, 1, 1])
    dec.save(folder / DECODER)
    return folder
