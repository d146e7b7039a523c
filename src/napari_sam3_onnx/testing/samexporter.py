"""Test graphs with the ``samexporter`` 0.5 SAM 3 layout (raw detector heads).

Names follow docs/layouts.md#samexporter-05. The encoder and language encoder are the
wkentaro ones (:mod:`napari_sam3_onnx.testing.wkentaro`). ``sam3_decoder.onnx`` (+
``.onnx.data``) declares ``original_height``/``original_width`` (int64 scalars, unused),
``vision_pos_enc_0..2``, ``backbone_fpn_0..2``, ``language_mask``, ``language_features``,
``language_embeds``, ``box_coords [K,1,4]``, ``box_labels [K,1]``, ``box_masks [1,K]``; with
``pruned=True`` the unused ``original_*`` and ``vision_pos_enc_0/1`` are left out, as onnxsim
does. Outputs: ``pred_boxes [1,Q,4]`` cxcywh, ``pred_logits [1,Q,1]``, ``pred_masks [1,Q,L,L]``
logits, ``presence_logit_dec [1,1]`` from the toy detector of
:mod:`napari_sam3_onnx.toy.concepts` (Q = 16 queries, one per cell of a 4 x 4 grid).
"""

from __future__ import annotations

from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.concepts import (
    CONTEXT,
    QUERY_SIDE,
    build_upstream_language,
    ints,
    position_penalty,
    toy_detector,
    upstream_text_level,
    xyxy_to_cxcywh,
)
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat
from .wkentaro import ENCODER, LANGUAGE, TEXT_CHANNELS, build_wk_encoder

DECODER = "sam3_decoder.onnx"
DEFAULT_SLOTS = 8


def build_raw_decoder(path: Path, geometry: TestGeometry, slots: int, pruned: bool) -> Path:
    """The raw-head decoder."""
    levels, c = geometry.levels, geometry.channels[2]
    big, q = levels[0], QUERY_SIDE * QUERY_SIDE
    b = GraphBuilder("samexporter_decoder")
    if not pruned:
        b.input("original_height", "int64", [])
        b.input("original_width", "int64", [])
    for i, size in enumerate(levels):
        if not pruned or i == 2:
            b.input(f"vision_pos_enc_{i}", "float32", [1, c, size, size])
    pos = "vision_pos_enc_2"  # the finest level's encoding, declared in both variants
    fpn0 = b.input("backbone_fpn_0", "float32", [1, c, levels[0], levels[0]])
    b.input("backbone_fpn_1", "float32", [1, c, levels[1], levels[1]])
    b.input("backbone_fpn_2", "float32", [1, c, levels[2], levels[2]])
    mask = b.input("language_mask", "bool", [1, CONTEXT])
    feat = b.input("language_features", "float32", [CONTEXT, 1, TEXT_CHANNELS[0]])
    b.input("language_embeds", "float32", [CONTEXT, 1, TEXT_CHANNELS[1]])
    coords = b.input("box_coords", "float32", [slots, 1, 4])
    labels = b.input("box_labels", "int64", [slots, 1])
    pads = b.input("box_masks", "bool", [1, slots])
    ex = (b.Reshape(coords, ints(b, -1, 4)), b.Cast(b.Reshape(labels, ints(b, -1)), to=1),
          b.Cast(b.Reshape(pads, ints(b, -1)), to=1))
    det = toy_detector(b, brightness_flat(b, fpn0, big), upstream_text_level(b, mask, feat), big,
                       exemplars=ex, penalty=position_penalty(b, pos, levels[2]))
    masks = b.weights(det["mask_logits"], (q, big * big))
    b.output(b.Reshape(xyxy_to_cxcywh(b, det["boxes"]), ints(b, 1, q, 4)), "pred_boxes",
             "float32", [1, q, 4])
    b.output(b.Reshape(det["logits"], ints(b, 1, q, 1)), "pred_logits", "float32", [1, q, 1])
    b.output(b.Reshape(masks, ints(b, 1, q, big, big)), "pred_masks", "float32",
             [1, q, big, big])
    b.output(b.Reshape(det["presence"], ints(b, 1, 1)), "presence_logit_dec", "float32", [1, 1])
    return b.save(path, external_data=path.name + ".data")


def build_samexporter(
    folder: Path, geometry: TestGeometry = SMALL, slots: int = DEFAULT_SLOTS, pruned: bool = False
) -> Path:
    """Write a samexporter bundle (encoder, language encoder, raw-head decoder) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_wk_encoder(folder / ENCODER, geometry, point_features=False)
    build_upstream_language(folder / LANGUAGE, TEXT_CHANNELS, data=LANGUAGE + ".data")
    build_raw_decoder(folder / DECODER, geometry, slots, pruned)
    return folder
