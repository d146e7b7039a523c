"""Test graphs with the onnx-community ``sam3-tracker-ONNX`` (HF-Transformers) layout.

Names and dtypes follow docs/layouts.md#hf-tracker: the vision encoder
takes ``pixel_values [1,3,S,S]`` float32 (mean = std = 0.5) and returns
``image_embeddings.0/.1/.2``; the prompt decoder takes ``input_points [1,1,N,2]`` float32,
``input_labels [1,1,N]`` int64, ``input_boxes [1,B,4]`` float32 xyxy (model-input pixels) and the
embeddings, and returns ``iou_scores [1,1,3]``, ``pred_masks [1,1,3,L,L]`` logits,
``object_score_logits [1,1,1]``. Semantics: :mod:`napari_sam3_onnx.toy.semantics`.
"""

from __future__ import annotations

from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat, feature_map, gray01_from_normalised, toy_sam_head

ENCODER = "vision_encoder.onnx"
DECODER = "prompt_encoder_mask_decoder.onnx"


def build_hf_tracker(folder: Path, geometry: TestGeometry = SMALL) -> Path:
    """Write the two graphs into ``folder`` (created) and return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    s, (l0, l1, l2), ch = geometry.input_size, geometry.levels, geometry.channels

    enc = GraphBuilder("hf_vision_encoder")
    x = enc.input("pixel_values", "float32", [1, 3, s, s])
    gray = enc.weights(gray01_from_normalised(enc, x), (1, 1, s, s))
    for i, (size, c) in enumerate(zip((l0, l1, l2), ch, strict=True)):
        enc.output(feature_map(enc, gray, size, c), f"image_embeddings.{i}", "float32",
                   [1, c, size, size])
    enc.save(folder / ENCODER, external_data=ENCODER + "_data")
    build_hf_decoder(folder / DECODER, geometry)
    return folder


def build_hf_decoder(path: Path, geometry: TestGeometry = SMALL) -> Path:
    """Write the prompt decoder ``prompt_encoder_mask_decoder`` to ``path``."""
    s, (l0, l1, l2), ch = geometry.input_size, geometry.levels, geometry.channels
    dec = GraphBuilder("hf_prompt_decoder")
    pts = dec.input("input_points", "float32", [1, 1, "num_points", 2])
    lab = dec.input("input_labels", "int64", [1, 1, "num_points"])
    box = dec.input("input_boxes", "float32", [1, "num_boxes", 4])
    e0 = dec.input("image_embeddings.0", "float32", [1, ch[0], l0, l0])
    dec.input("image_embeddings.1", "float32", [1, ch[1], l1, l1])
    dec.input("image_embeddings.2", "float32", [1, ch[2], l2, l2])
    points = dec.Reshape(pts, dec.const([-1, 2], "int64"))
    labels = dec.Cast(dec.Reshape(lab, dec.const([-1], "int64")), to=1)
    boxes = dec.Reshape(box, dec.const([-1, 4], "int64"))
    logits, iou, obj = toy_sam_head(
        dec, brightness_flat(dec, e0, l0), points, labels, s, l0, boxes=boxes, tokens=(1, 2, 3)
    )
    dec.output(dec.Reshape(iou, dec.const([1, 1, 3], "int64")), "iou_scores", "float32", [1, 1, 3])
    dec.output(dec.Reshape(logits, dec.const([1, 1, 3, l0, l0], "int64")), "pred_masks",
               "float32", [1, 1, 3, l0, l0])
    dec.output(dec.Reshape(obj, dec.const([1, 1, 1], "int64")), "object_score_logits", "float32",
               [1, 1, 1])
    return dec.save(path)
