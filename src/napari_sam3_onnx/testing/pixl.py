"""Test graphs in the shape of the PIXL exports (SAM 3 and EfficientSAM3 EV-M).

Published (``xuckless/pixl-sam3-onnx``, ``xuckless/pixl-efficientsam3-onnx``; docs/models.md):
file names, the text encoder's names, 8 exemplar slots and the decoder's outputs.

What the cards do **not** publish is invented here so that recognition cannot lean on it:

* ``*_image_encoder*.onnx``: ``image`` float32 ``[1,3,S,S]`` (mean = std = 0.5) -> six outputs
  with opaque names ``output_0..5``: level 0, its position encoding, level 1, its encoding,
  level 2, its encoding (encodings are constants, the same shape as their level, so only the
  graph's nodes tell them apart);
* ``*_text_encoder*.onnx``: ``tokens [1,T]`` int64 (0-padded; T = 32, or 16 for the
  EfficientSAM3 MobileCLIP student) -> ``language_features [T,1,C]``, ``language_padding
  [1,T]`` bool (True = pad), ``language_embeds [T,1,E]``;
* ``*_decoder.onnx``: the encoder's names for its levels and top-level encoding,
  ``language_features [32,1,C]``, ``language_padding [1,32]``, (PIXL only) ``language_embeds
  [32,1,E]``, exemplar ``box_coords [8,1,4]``, ``box_labels [8,1]``, ``box_masks [1,8]`` (True =
  unused) -> ``pred_logits [1,Q,1]``, ``pred_boxes [1,Q,4]`` cxcywh, ``pred_masks [1,Q,L,L]``
  logits, ``presence_logit [1,1]``: the toy detector of :mod:`~.concepts` (position checked).
"""

from __future__ import annotations

from pathlib import Path

from ..toy.builder import GraphBuilder
from ..toy.concepts import (
    CONTEXT,
    I64,
    QUERY_SIDE,
    ints,
    pad_last,
    position_output,
    position_penalty,
    token_levels,
    toy_detector,
    upstream_text_level,
    xyxy_to_cxcywh,
)
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat, feature_map, gray01_from_normalised

SLOTS = 8
TEXT_CHANNELS = (4, 6)
PIXL = ("sam3_image_encoder_fp16.onnx", "sam3_text_encoder_fp16.onnx", "sam3_decoder.onnx")
EFFICIENT = ("efficientsam3_ev_m_image_encoder.onnx", "efficientsam3_ev_m_text_encoder.onnx",
             "efficientsam3_ev_m_decoder.onnx")


def build_encoder(path: Path, geometry: TestGeometry) -> Path:
    """Levels and position encodings under opaque names, interleaved."""
    s, c = geometry.input_size, geometry.channels[2]
    b = GraphBuilder(path.stem)
    gray = b.weights(gray01_from_normalised(b, b.input("image", "float32", [1, 3, s, s])),
                     (1, 1, s, s))
    for i, size in enumerate(geometry.levels):
        b.output(feature_map(b, gray, size, c), f"output_{2 * i}", "float32", [1, c, size, size])
        b.output(position_output(b, size, c), f"output_{2 * i + 1}", "float32",
                 [1, c, size, size])
    return b.save(path, external_data=path.name + ".data")


def build_text(path: Path, context: int = CONTEXT) -> Path:
    """``tokens`` -> ``language_features``, ``language_padding``, ``language_embeds``."""
    b = GraphBuilder(path.stem)
    tok = b.input("tokens", I64, [1, context])
    b.output(b.Equal(tok, b.const([0], I64)), "language_padding", "bool", [1, context])
    seq = b.Transpose(b.Unsqueeze(token_levels(b, tok), ints(b, 2)), perm=[1, 0, 2])
    for name, c in zip(("language_features", "language_embeds"), TEXT_CHANNELS, strict=True):
        b.output(pad_last(b, seq, 3, c), name, "float32", [context, 1, c])
    return b.save(path)


def build_decoder(path: Path, geometry: TestGeometry, embeds: bool) -> Path:
    """The concept decoder with 8 exemplar slots (and ``language_embeds`` when ``embeds``)."""
    levels, c, q = geometry.levels, geometry.channels[2], QUERY_SIDE * QUERY_SIDE
    big = levels[0]
    b = GraphBuilder(path.stem)
    fpn0 = b.input("output_0", "float32", [1, c, big, big])
    b.input("output_2", "float32", [1, c, levels[1], levels[1]])
    b.input("output_4", "float32", [1, c, levels[2], levels[2]])
    pos = b.input("output_5", "float32", [1, c, levels[2], levels[2]])
    feat = b.input("language_features", "float32", [CONTEXT, 1, TEXT_CHANNELS[0]])
    mask = b.input("language_padding", "bool", [1, CONTEXT])
    if embeds:
        b.input("language_embeds", "float32", [CONTEXT, 1, TEXT_CHANNELS[1]])
    coords = b.input("box_coords", "float32", [SLOTS, 1, 4])
    labels = b.input("box_labels", I64, [SLOTS, 1])
    pads = b.input("box_masks", "bool", [1, SLOTS])
    ex = (b.Reshape(coords, ints(b, -1, 4)), b.Cast(b.Reshape(labels, ints(b, -1)), to=1),
          b.Cast(b.Reshape(pads, ints(b, -1)), to=1))
    det = toy_detector(b, brightness_flat(b, fpn0, big), upstream_text_level(b, mask, feat), big,
                       exemplars=ex, penalty=position_penalty(b, pos, levels[2]))
    masks = b.weights(det["mask_logits"], (q, big * big))
    b.output(b.Reshape(det["logits"], ints(b, 1, q, 1)), "pred_logits", "float32", [1, q, 1])
    b.output(b.Reshape(xyxy_to_cxcywh(b, det["boxes"]), ints(b, 1, q, 4)), "pred_boxes",
             "float32", [1, q, 4])
    b.output(b.Reshape(masks, ints(b, 1, q, big, big)), "pred_masks", "float32",
             [1, q, big, big])
    b.output(b.Reshape(det["presence"], ints(b, 1, 1)), "presence_logit", "float32", [1, 1])
    return b.save(path, external_data=path.name + ".data")


def build_pixl(folder: Path, geometry: TestGeometry = SMALL, efficient: bool = False) -> Path:
    """PIXL's SAM 3 export, or (``efficient``) its EfficientSAM3 EV-M one (16-token text)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = EFFICIENT if efficient else PIXL
    build_encoder(folder / names[0], geometry)
    build_text(folder / names[1], 16 if efficient else CONTEXT)
    build_decoder(folder / names[2], geometry, embeds=not efficient)
    return folder
