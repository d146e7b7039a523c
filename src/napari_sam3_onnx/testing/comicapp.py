"""Test graphs in the shape of the SAM 3.1 ComicApp export (card only).

What the card fixes (docs/layouts.md#comicapp-sam31): file names, an fp16 image
encoder ``[1,3,S,S]`` (mean = std = 0.5) with **four** feature levels of which the prompt graphs
consume the first three, and the prompt graph's outputs ``pred_logits [1,Q,1]``,
``pred_boxes [1,Q,4]`` cxcywh normalised, ``pred_masks [1,Q,L,L]`` logits,
``presence_logit [1,1]``. Everything else is **invented here** (the real names are unknown), on
purpose different from the other layouts so that the adapter must find roles by introspection:

* ``sam31_image_encoder.onnx``: ``image`` float16 -> ``image_features_0..3`` float16
  ``[1,C,l,l]`` for ``l`` = 4g, 2g, g, g/2 (brightness in channel 0).
* ``sam31_text_encoder.onnx``: an upstream-style language encoder (``tokens`` -> ...), as
  :func:`~napari_sam3_onnx.toy.concepts.build_upstream_language`.
* ``sam31_prompt_side.onnx`` (+ ``.data``): ``fpn_feat_0..2`` float32, ``text_features
  [1,32,C]`` (batch-first), ``text_mask [1,32]`` bool (True = pad) -> the four outputs.
* ``sam31_prompt_box.onnx`` (+ ``.data``): the same plus ``boxes [1,K,4]`` cxcywh,
  ``box_labels [1,K]`` int64 and ``box_padding [1,K]`` bool (True = unused slot).

Semantics: the toy detector of :mod:`napari_sam3_onnx.toy.concepts` (presence not folded).
"""

from __future__ import annotations

from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.concepts import (
    CONTEXT,
    QUERY_SIDE,
    build_upstream_language,
    channel0,
    ints,
    text_level,
    toy_detector,
    xyxy_to_cxcywh,
)
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat, feature_map, gray01_from_normalised

ENCODER, TEXT = "sam31_image_encoder.onnx", "sam31_text_encoder.onnx"
SIDE, BOX = "sam31_prompt_side.onnx", "sam31_prompt_box.onnx"
TEXT_CHANNELS = (4, 6)
BOX_SLOTS = 4


def levels4(geometry: TestGeometry) -> tuple[int, int, int, int]:
    """The four level sizes (the fourth is half the top grid, 36 in SAM 3)."""
    return (*geometry.levels, max(geometry.grid // 2, 1))


def build_encoder(path: Path, geometry: TestGeometry) -> Path:
    """fp16 encoder with four levels."""
    s, c = geometry.input_size, geometry.channels[2]
    b = GraphBuilder("sam31_image_encoder")
    x = b.input("image", "float16", [1, 3, s, s])
    gray = b.weights(gray01_from_normalised(b, x, fp16=True), (1, 1, s, s))
    for i, size in enumerate(levels4(geometry)):
        b.output(feature_map(b, gray, size, c), f"image_features_{i}", "float16",
                 [1, c, size, size])
    return b.save(path)


def build_prompt(
    path: Path, geometry: TestGeometry, with_boxes: bool, extra_input: str | None = None
) -> Path:
    """The prompt graph (text only, or text + exemplar boxes).

    ``extra_input`` adds an unused float ``[3]`` input of that name: a graph the adapter cannot
    place.
    """
    levels, c = geometry.levels, geometry.channels[2]
    big, q = levels[0], QUERY_SIDE * QUERY_SIDE
    b = GraphBuilder(path.stem)
    fpn0 = b.input("fpn_feat_0", "float32", [1, c, levels[0], levels[0]])
    b.input("fpn_feat_1", "float32", [1, c, levels[1], levels[1]])
    b.input("fpn_feat_2", "float32", [1, c, levels[2], levels[2]])
    feat = b.input("text_features", "float32", [1, CONTEXT, TEXT_CHANNELS[0]])
    mask = b.input("text_mask", "bool", [1, CONTEXT])
    if extra_input:
        b.input(extra_input, "float32", [3])
    levels_t = b.Reshape(channel0(b, feat, 2), ints(b, -1))
    valid = b.Reshape(b.Sub(b.const(1.0), b.Cast(mask, to=1)), ints(b, -1))
    ex = None
    if with_boxes:
        boxes = b.input("boxes", "float32", [1, BOX_SLOTS, 4])
        labels = b.input("box_labels", "int64", [1, BOX_SLOTS])
        pads = b.input("box_padding", "bool", [1, BOX_SLOTS])
        ex = (b.Reshape(boxes, ints(b, -1, 4)), b.Cast(b.Reshape(labels, ints(b, -1)), to=1),
              b.Cast(b.Reshape(pads, ints(b, -1)), to=1))
    det = toy_detector(b, brightness_flat(b, fpn0, big), text_level(b, levels_t, valid), big,
                       exemplars=ex)
    masks = b.weights(det["mask_logits"], (q, big * big))
    b.output(b.Reshape(det["logits"], ints(b, 1, q, 1)), "pred_logits", "float32", [1, q, 1])
    b.output(b.Reshape(xyxy_to_cxcywh(b, det["boxes"]), ints(b, 1, q, 4)), "pred_boxes",
             "float32", [1, q, 4])
    b.output(b.Reshape(masks, ints(b, 1, q, big, big)), "pred_masks", "float32",
             [1, q, big, big])
    b.output(b.Reshape(det["presence"], ints(b, 1, 1)), "presence_logit", "float32", [1, 1])
    return b.save(path, external_data=path.name + ".data")


def build_comicapp(folder: Path, geometry: TestGeometry = SMALL, box_graph: bool = True) -> Path:
    """Write the bundle into ``folder`` (created) and return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_encoder(folder / ENCODER, geometry)
    build_upstream_language(folder / TEXT, TEXT_CHANNELS, data=TEXT + ".data")
    build_prompt(folder / SIDE, geometry, with_boxes=False)
    if box_graph:
        build_prompt(folder / BOX, geometry, with_boxes=True)
    return folder
