"""Test graphs with the wkentaro v0.2.0 layout (``rusen/sam3-browser-int8`` ships it in int8).

Encoder and language encoder as :mod:`~napari_sam3_onnx.testing.wkentaro`. The decoder's inputs
begin with ``original_height`` / ``original_width`` (int64 scalars) followed by v0.3's; it runs
the toy detector with the in-graph 0.5 cut and answers in the original image: ``boxes [N,4]``
x0, y0, x1, y1 in original pixels, ``scores [N]``, ``masks [N,1,rows,cols]`` bool (the
probabilities resized bilinearly to the original size, > 0.5).
"""

from __future__ import annotations

from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.concepts import (
    CONTEXT,
    build_upstream_language,
    ints,
    position_penalty,
    toy_detector,
    upstream_text_level,
)
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat
from .wkentaro import DECODER, ENCODER, LANGUAGE, TEXT_CHANNELS, build_wk_encoder


def build_v02_decoder(path: Path, geometry: TestGeometry) -> Path:
    """The v0.2.0 decoder (one exemplar slot)."""
    levels, c = geometry.levels, geometry.channels[2]
    big = levels[0]
    b = GraphBuilder("wk_v020_decoder")
    height = b.input("original_height", "int64", [])
    width = b.input("original_width", "int64", [])
    fpn0 = b.input("backbone_fpn_0", "float32", [1, c, levels[0], levels[0]])
    b.input("backbone_fpn_1", "float32", [1, c, levels[1], levels[1]])
    b.input("backbone_fpn_2", "float32", [1, c, levels[2], levels[2]])
    pos = b.input("vision_pos_enc_2", "float32", [1, c, levels[2], levels[2]])
    mask = b.input("language_mask", "bool", [1, CONTEXT])
    feat = b.input("language_features", "float32", [CONTEXT, 1, TEXT_CHANNELS[0]])
    coords = b.input("box_coords", "float32", [1, 1, 4])
    labels = b.input("box_labels", "int64", [1, 1])
    pads = b.input("box_masks", "bool", [1, 1])
    ex = (b.Reshape(coords, ints(b, -1, 4)), b.Cast(b.Reshape(labels, ints(b, -1)), to=1),
          b.Cast(b.Reshape(pads, ints(b, -1)), to=1))
    det = toy_detector(b, brightness_flat(b, fpn0, big), upstream_text_level(b, mask, feat), big,
                       exemplars=ex, penalty=position_penalty(b, pos, levels[2]))
    keep = b.Greater(det["scores"], b.const(0.5))
    h, w = (b.Reshape(x, ints(b, 1)) for x in (height, width))
    scale = b.Cast(b.Concat(w, h, w, h, axis=0), to=1)  # [4]
    probs = b.Reshape(b.Sigmoid(det["mask_logits"]), ints(b, -1, 1, big, big))
    kept = b.Compress(probs, keep, axis=0)
    sizes = b.Concat(b.Slice(b.Shape(kept), ints(b, 0), ints(b, 2), ints(b, 0)), h, w, axis=0)
    full = b.op("Resize", [kept, "", "", sizes], mode="linear")
    b.output(b.Mul(b.Compress(det["boxes"], keep, axis=0), scale), "boxes", "float32", ["N", 4])
    b.output(b.Compress(det["scores"], keep, axis=0), "scores", "float32", ["N"])
    b.output(b.Greater(full, b.const(0.5)), "masks", "bool", ["N", 1, "H", "W"])
    return b.save(path)


def build_wkentaro_v02(folder: Path, geometry: TestGeometry = SMALL) -> Path:
    """Write a v0.2.0 bundle (as rusen/sam3-browser-int8 lays it out) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_wk_encoder(folder / ENCODER, geometry, point_features=False)
    build_upstream_language(folder / LANGUAGE, TEXT_CHANNELS, data=LANGUAGE + ".data")
    build_v02_decoder(folder / DECODER, geometry)
    return folder
