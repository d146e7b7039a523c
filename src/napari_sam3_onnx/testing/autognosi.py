"""Test graphs with the ``Autognosi/sam3-onnx-vulkan`` (int8) layout.

Names, dtypes and ranks follow the card as summarised in docs/layouts.md#autognosi-int8:

* ``vision_encoder.onnx``: ``pixel_values [1,3,S,S]`` float32 (mean = std = 0.5) ->
  ``fpn_0..2`` (brightness in channel 0).
* ``text_encoder.onnx``: ``input_ids [1,32]`` (pad 49407) + ``attention_mask [1,32]`` int64
  (1 = token) -> ``text_features [1,32,C]`` (see ``concepts.build_hf_text``).
* ``detector.onnx``: ``fpn_0..2``, ``text_features``, ``attention_mask`` -> ``pred_masks_bits``
  uint8 ``[1,Q,L,L/8]`` (each query's on pixels, **bit-packed along the width** in ``bitorder``:
  "big" puts column ``8j`` in the most significant bit of byte ``j``, "little" in the least),
  ``pred_boxes [1,Q,4]`` xyxy normalised, ``pred_logits [1,Q]``, ``presence_logits [1,1]``,
  ``semantic_seg [1,1,L,L]`` (the pixel logits). Semantics: the toy detector of
  :mod:`napari_sam3_onnx.toy.concepts`, without exemplars (this layout has none).
* ``tracker_vision_encoder.onnx``: ``pixel_values`` -> ``image_embeddings_0..2`` (brightness).
* ``prompt_decoder.onnx``: ``image_embeddings_0..2``, ``input_points [1,P,N,2]`` float32
  (model-input pixels), ``input_labels [1,P,N]`` int64 -> ``pred_masks [1,P,4,L,L]`` logits
  (token 0 single-mask, 1-3 multimask), ``iou_scores [1,P,4]``, ``object_score_logits [1,P,1]``:
  the toy SAM head of :mod:`napari_sam3_onnx.toy.semantics` (boxes as label-2/3 points).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..toy.builder import GraphBuilder
from ..toy.concepts import CONTEXT, QUERY_SIDE, build_hf_text, hf_text_level, ints, toy_detector
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import (
    brightness_flat,
    feature_map,
    gray01_from_normalised,
    pad_prompt,
    toy_sam_head,
)

VISION, TEXT, DETECTOR = "vision_encoder.onnx", "text_encoder.onnx", "detector.onnx"
TRACKER, PROMPT = "tracker_vision_encoder.onnx", "prompt_decoder.onnx"
TEXT_CHANNELS = 4


def _encoder(path: Path, geometry: TestGeometry, names: tuple[str, ...],
             channels: tuple[int, ...]) -> Path:
    s = geometry.input_size
    b = GraphBuilder(path.stem)
    gray = b.weights(gray01_from_normalised(b, b.input("pixel_values", "float32", [1, 3, s, s])),
                     (1, 1, s, s))
    for name, size, c in zip(names, geometry.levels, channels, strict=True):
        b.output(feature_map(b, gray, size, c), name, "float32", [1, c, size, size])
    return b.save(path)


def build_detector(path: Path, geometry: TestGeometry, bitorder: str = "big") -> Path:
    """The detector with bit-packed masks (``bitorder`` "big" or "little")."""
    (l0, l1, l2), c = geometry.levels, geometry.channels[2]
    q, w8 = QUERY_SIDE * QUERY_SIDE, l0 // 8
    b = GraphBuilder("autognosi_detector")
    fpn0 = b.input("fpn_0", "float32", [1, c, l0, l0])
    b.input("fpn_1", "float32", [1, c, l1, l1])
    b.input("fpn_2", "float32", [1, c, l2, l2])
    feat = b.input("text_features", "float32", [1, CONTEXT, TEXT_CHANNELS])
    mask = b.input("attention_mask", "int64", [1, CONTEXT])
    det = toy_detector(b, brightness_flat(b, fpn0, l0), hf_text_level(b, feat, mask), l0)
    weights = 2.0 ** np.arange(8, dtype=np.float32)
    weights = weights[::-1].copy() if bitorder == "big" else weights
    packed = b.ReduceSum(b.Mul(b.Reshape(det["on"], ints(b, q, l0, w8, 8)), b.const(weights)),
                         ints(b, 3), keepdims=0)
    b.output(b.Reshape(packed, ints(b, 1, q, l0, w8)), "pred_masks_bits", "uint8",
             [1, q, l0, w8])
    b.output(b.Reshape(det["boxes"], ints(b, 1, q, 4)), "pred_boxes", "float32", [1, q, 4])
    b.output(b.Reshape(det["logits"], ints(b, 1, q)), "pred_logits", "float32", [1, q])
    b.output(b.Reshape(det["presence"], ints(b, 1, 1)), "presence_logits", "float32", [1, 1])
    b.output(b.Reshape(det["pixel"], ints(b, 1, 1, l0, l0)), "semantic_seg", "float32",
             [1, 1, l0, l0])
    return b.save(path)


def build_prompt_decoder(path: Path, geometry: TestGeometry, pads: bool = False) -> Path:
    """The SAM head with four mask tokens (single-mask first).

    With ``pads`` it appends SAM's padding point itself; either way its masks shrink when no
    label -1 point reaches the head.
    """
    s, (l0, l1, l2), ch = geometry.input_size, geometry.levels, geometry.channels
    b = GraphBuilder("autognosi_prompt_decoder")
    e0 = b.input("image_embeddings_0", "float32", [1, ch[0], l0, l0])
    b.input("image_embeddings_1", "float32", [1, ch[1], l1, l1])
    b.input("image_embeddings_2", "float32", [1, ch[2], l2, l2])
    pts = b.input("input_points", "float32", [1, "P", "N", 2])
    lab = b.input("input_labels", "int64", [1, "P", "N"])
    points, labels = b.Reshape(pts, ints(b, -1, 2)), b.Cast(b.Reshape(lab, ints(b, -1)), to=1)
    if pads:
        points, labels = pad_prompt(b, points, labels)
    logits, iou, obj = toy_sam_head(b, brightness_flat(b, e0, l0), points, labels, s, l0,
                                    needs_padding=True)
    b.output(b.Reshape(logits, ints(b, 1, 1, 4, l0, l0)), "pred_masks", "float32",
             [1, 1, 4, l0, l0])
    b.output(b.Reshape(iou, ints(b, 1, 1, 4)), "iou_scores", "float32", [1, 1, 4])
    b.output(b.Reshape(obj, ints(b, 1, 1, 1)), "object_score_logits", "float32", [1, 1, 1])
    return b.save(path)


def build_autognosi(folder: Path, geometry: TestGeometry = SMALL, bitorder: str = "big",
                    pads: bool = False) -> Path:
    """Write the five graphs into ``folder`` (created) and return it.

    ``pads``: the prompt decoder appends SAM's padding point itself (:func:`build_prompt_decoder`).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    c = geometry.channels[2]
    _encoder(folder / VISION, geometry, ("fpn_0", "fpn_1", "fpn_2"), (c, c, c))
    build_hf_text(folder / TEXT, TEXT_CHANNELS)
    build_detector(folder / DETECTOR, geometry, bitorder)
    _encoder(folder / TRACKER, geometry,
             ("image_embeddings_0", "image_embeddings_1", "image_embeddings_2"),
             geometry.channels)
    build_prompt_decoder(folder / PROMPT, geometry, pads)
    return folder
