"""Test graphs with the ``wkentaro/sam3-onnx`` layouts v0.3.0 (osam) and v0.6.0 (card).

Names, dtypes and ranks follow docs/layouts.md#wkentaro-v03:

* ``sam3_image_encoder.onnx`` (+ ``.onnx.data``): ``image`` uint8 ``[3,S,S]`` ->
  ``vision_pos_enc_0..2`` (constant :func:`~napari_sam3_onnx.toy.concepts.position_pattern`
  maps) and ``backbone_fpn_0..2`` (brightness in channel 0); v0.6 adds ``image_embeddings``
  ``[1,C,g,g]``, ``high_res_features1 [1,C0,4g,4g]``, ``high_res_features2 [1,C1,2g,2g]``.
* ``sam3_language_encoder.onnx`` (+ ``.onnx.data``): ``tokens`` -> ``text_attention_mask``,
  ``text_memory``, ``text_embeds`` (see ``concepts.build_upstream_language``).
* ``sam3_decoder.onnx``: ``backbone_fpn_0..2``, ``vision_pos_enc_2``, ``language_mask``,
  ``language_features``, ``box_coords [K,1,4]``, ``box_labels [K,1]`` int64, ``box_masks [1,K]``
  bool (K = 1 for v0.3, 16 for v0.6) -> ``boxes [N,4]`` xyxy normalised, ``scores [N]``,
  ``masks [N,1,L,L]`` sigmoid probabilities, keeping only queries with score > 0.5 (the cut is in
  the graph, as in the real exports). Semantics: the toy detector of
  :mod:`napari_sam3_onnx.toy.concepts`.
* v0.6 ``sam3_point_decoder.onnx`` (names by analogy with osam's SAM 2 decoder, overridable):
  ``image_embeddings``, ``high_res_features1``, ``high_res_features2``, ``point_coords [1,N,2]``
  float32 (model-input pixels), ``point_labels [1,N]`` float32, ``mask_input [1,1,L,L]``,
  ``has_mask_input [1]`` -> ``masks [1,3,S,S]``, ``iou_predictions [1,3]``,
  ``low_res_masks [1,3,L,L]``: the toy SAM head of :mod:`napari_sam3_onnx.toy.semantics`
  (multimask tokens 1-3) on the brightness in ``high_res_features1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.concepts import (
    CONTEXT,
    build_upstream_language,
    ints,
    position_output,
    position_penalty,
    toy_detector,
    upstream_text_level,
)
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import (
    brightness_flat,
    feature_map,
    gray01_from_uint8_chw,
    pad_prompt,
    toy_sam_head,
)

ENCODER = "sam3_image_encoder.onnx"
LANGUAGE = "sam3_language_encoder.onnx"
DECODER = "sam3_decoder.onnx"
POINT_DECODER = "sam3_point_decoder.onnx"
TEXT_CHANNELS = (4, 6)
POINT_NAMES = {
    "image_embeddings": "image_embeddings", "high_res_features1": "high_res_features1",
    "high_res_features2": "high_res_features2", "point_coords": "point_coords",
    "point_labels": "point_labels", "mask_input": "mask_input",
    "has_mask_input": "has_mask_input", "masks": "masks",
    "iou_predictions": "iou_predictions", "low_res_masks": "low_res_masks",
}


def build_wk_encoder(path: Path, geometry: TestGeometry, point_features: bool) -> Path:
    """The image encoder (six outputs, or nine with ``point_features``)."""
    s, levels, ch = geometry.input_size, geometry.levels, geometry.channels
    c = ch[2]  # the detector neck has one channel count on every level
    b = GraphBuilder("wk_image_encoder")
    x = b.input("image", "uint8", [3, s, s])
    gray = b.weights(gray01_from_uint8_chw(b, x), (1, 1, s, s))
    for i, size in enumerate(levels):
        b.output(position_output(b, size, c), f"vision_pos_enc_{i}", "float32", [1, c, size, size])
    for i, size in enumerate(levels):
        b.output(feature_map(b, gray, size, c), f"backbone_fpn_{i}", "float32", [1, c, size, size])
    if point_features:
        for name, size, cc in (("image_embeddings", levels[2], ch[2]),
                               ("high_res_features1", levels[0], ch[0]),
                               ("high_res_features2", levels[1], ch[1])):
            b.output(feature_map(b, gray, size, cc), name, "float32", [1, cc, size, size])
    return b.save(path, external_data=path.name + ".data")


def build_wk_decoder(path: Path, geometry: TestGeometry, slots: int) -> Path:
    """The concept decoder with ``slots`` exemplar slots and the in-graph 0.5 score cut."""
    levels, c = geometry.levels, geometry.channels[2]
    big = levels[0]
    b = GraphBuilder("wk_decoder")
    fpn0 = b.input("backbone_fpn_0", "float32", [1, c, levels[0], levels[0]])
    b.input("backbone_fpn_1", "float32", [1, c, levels[1], levels[1]])
    b.input("backbone_fpn_2", "float32", [1, c, levels[2], levels[2]])
    pos = b.input("vision_pos_enc_2", "float32", [1, c, levels[2], levels[2]])
    mask = b.input("language_mask", "bool", [1, CONTEXT])
    feat = b.input("language_features", "float32", [CONTEXT, 1, TEXT_CHANNELS[0]])
    coords = b.input("box_coords", "float32", [slots, 1, 4])
    labels = b.input("box_labels", "int64", [slots, 1])
    pads = b.input("box_masks", "bool", [1, slots])
    ex = (b.Reshape(coords, ints(b, -1, 4)), b.Cast(b.Reshape(labels, ints(b, -1)), to=1),
          b.Cast(b.Reshape(pads, ints(b, -1)), to=1))
    det = toy_detector(b, brightness_flat(b, fpn0, big), upstream_text_level(b, mask, feat), big,
                       exemplars=ex, penalty=position_penalty(b, pos, levels[2]))
    keep = b.Greater(det["scores"], b.const(0.5))
    probs = b.Reshape(b.Sigmoid(det["mask_logits"]), ints(b, -1, 1, big, big))
    b.output(b.Compress(det["boxes"], keep, axis=0), "boxes", "float32", ["N", 4])
    b.output(b.Compress(det["scores"], keep, axis=0), "scores", "float32", ["N"])
    b.output(b.Compress(probs, keep, axis=0), "masks", "float32", ["N", 1, big, big])
    return b.save(path)


def build_point_decoder(
    path: Path, geometry: TestGeometry, names: Mapping[str, str] | None = None,
    mask_input: bool = True, pads: bool = False,
) -> Path:
    """The v0.6 point decoder; ``names`` renames any of :data:`POINT_NAMES`.

    With ``pads`` it appends SAM's padding point itself; either way its masks shrink when no
    label -1 point reaches the head.
    """
    n = {**POINT_NAMES, **(names or {})}
    s, (l0, l1, l2), ch = geometry.input_size, geometry.levels, geometry.channels
    b = GraphBuilder("wk_point_decoder")
    b.input(n["image_embeddings"], "float32", [1, ch[2], l2, l2])
    hr1 = b.input(n["high_res_features1"], "float32", [1, ch[0], l0, l0])
    b.input(n["high_res_features2"], "float32", [1, ch[1], l1, l1])
    pts = b.input(n["point_coords"], "float32", [1, "num_points", 2])
    lab = b.input(n["point_labels"], "float32", [1, "num_points"])
    extra = {}
    if mask_input:
        m = b.input(n["mask_input"], "float32", [1, 1, l0, l0])
        has = b.input(n["has_mask_input"], "float32", [1])
        extra = {"mask_input": b.Reshape(m, ints(b, l0 * l0)), "has_mask": has}
    points, labels = b.Reshape(pts, ints(b, -1, 2)), b.Reshape(lab, ints(b, -1))
    if pads:
        points, labels = pad_prompt(b, points, labels)
    logits, iou, _ = toy_sam_head(b, brightness_flat(b, hr1, l0), points, labels, s, l0,
                                  tokens=(1, 2, 3), needs_padding=True, **extra)
    low = b.Reshape(logits, ints(b, 1, 3, l0, l0))
    b.output(b.resize_to(low, (s, s), (1, 3)), n["masks"], "float32", [1, 3, s, s])
    b.output(b.Reshape(iou, ints(b, 1, 3)), n["iou_predictions"], "float32", [1, 3])
    b.output(low, n["low_res_masks"], "float32", [1, 3, l0, l0])
    return b.save(path)


def build_wkentaro_v03(folder: Path, geometry: TestGeometry = SMALL) -> Path:
    """Write a v0.3.0 bundle (encoder, language encoder, 1-slot decoder) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_wk_encoder(folder / ENCODER, geometry, point_features=False)
    build_upstream_language(folder / LANGUAGE, TEXT_CHANNELS, data=LANGUAGE + ".data")
    build_wk_decoder(folder / DECODER, geometry, slots=1)
    return folder


def build_wkentaro_v06(
    folder: Path, geometry: TestGeometry = SMALL, slots: int = 16,
    point_names: Mapping[str, str] | None = None, pads: bool = False,
) -> Path:
    """Write a v0.6.0 bundle (9-output encoder, language encoder, decoder, point decoder).

    ``pads``: the point decoder appends SAM's padding point itself (:func:`build_point_decoder`).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_wk_encoder(folder / ENCODER, geometry, point_features=True)
    build_upstream_language(folder / LANGUAGE, TEXT_CHANNELS, data=LANGUAGE + ".data")
    build_wk_decoder(folder / DECODER, geometry, slots=slots)
    build_point_decoder(folder / POINT_DECODER, geometry, point_names, pads=pads)
    return folder
