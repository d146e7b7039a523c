"""Test graphs with the Hugging Face ``Sam3Model``-family layouts (docs/models.md, "hf-sam3").

Three naming families, as their model cards and consumers give them:

* ``"hf"`` (danilobukvic, parodiniccolo): encoder outputs ``fpn_hidden_state_0..3`` (4g, 2g, g,
  g/2) and ``fpn_position_encoding_0..3``; text encoder ``input_ids`` + ``attention_mask`` ->
  ``text_features``; decoder ``fpn_hidden_state_0..2``, ``fpn_position_encoding_2``,
  ``text_features``, ``attention_mask`` (int64, 1 = token) -> ``pred_masks``, ``pred_boxes``
  (xyxy), ``pred_logits`` and **no presence output** (the toy folds its presence into the logits);
* ``"wwww"`` (wW-Ww): encoder ``vision_fp16`` (float16 in and out) -> ``features_<size>``
  (no position encodings) + ``image_embeddings.0/1/2``; detector ``features_*``,
  ``text_features``, ``text_mask`` bool (True = token) -> ``pred_logits [1,Q]``, ``pred_boxes``,
  ``presence_logits [1,1]``, ``pred_masks``, ``semantic_seg``;
* ``"usls"`` (Intel Geti EfficientSAM3): ``fpn_feat_0..2``, ``fpn_pos_2``; text encoder also
  returns ``text_mask`` bool; ``prompt-decoder`` takes ``prompt_features [1,L,C]`` /
  ``prompt_mask [1,L]`` bool (True = valid) too, and its ``presence_logits`` is a **constant 0**
  in the graph.

Semantics: the toy detector of :mod:`~napari_sam3_onnx.toy.concepts` on brightness in channel
0 of level 0. Position encodings are :func:`~napari_sam3_onnx.toy.memory.cell_centres_map`
(cell centre x / y in pixels, channels 0 / 1), the encoding the jax-video memory graphs expect,
so one encoder serves both; a detector fed a wrong one (or a valid geometry row) finds nothing.
A dual encoder's ``image_embeddings.2`` is the raw top level plus ``no_mem_bias`` in channel 1,
as Hugging Face adds ``no_mem_embed`` inside its encoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..toy import memory as sem
from ..toy.builder import GraphBuilder
from ..toy.concepts import (
    CONTEXT,
    I64,
    QUERY_SIDE,
    build_hf_text,
    channel0,
    hf_text_level,
    ints,
    toy_detector,
)
from ..toy.geometry import SMALL, TestGeometry
from ..toy.semantics import brightness_flat, feature_map, gray01_from_normalised
from .hf_tracker import DECODER as HF_DECODER
from .hf_tracker import build_hf_decoder
from .jax_video import build_jax_video

TEXT_CHANNELS = 4
#: Width of the toy geometry rows: cx, cy, w, h, label, 0.
GEO_CHANNELS = 6
DUAL_ENCODER = "sam3_vision_dual_q4f16.onnx"
#: A student in the dual encoder's place (no such export is published; the name says what it is).
STUDENT_ENCODER = "efficientsam3_student_vision_dual.onnx"
DANI = ("vision_encoder.onnx", "text_encoder.onnx", "decoder.onnx")
WWWW = ("vision_fp16.onnx", "text_fp16.onnx", "detector.onnx")
#: danilobukvic's int4 text encoder and decoder as the public-mission entry names them.
MISSION_FILES = ("text_encoder_int4.onnx", "decoder_int4.onnx")
GETI = ("vision-encoder.onnx", "text-encoder.onnx", "prompt-decoder.onnx",
        "geometry-encoder.onnx")


def level_names(family: str, geometry: TestGeometry) -> list[str]:
    """Detector level output names, largest first (four for ``"hf"``)."""
    if family == "hf":
        return [f"fpn_hidden_state_{i}" for i in range(4)]
    if family == "wwww":
        return [f"features_{size}" for size in geometry.levels]
    return [f"fpn_feat_{i}" for i in range(3)]


def position_names(family: str) -> dict[int, str]:
    """Level index -> position-encoding output name."""
    return {"hf": {i: f"fpn_position_encoding_{i}" for i in range(4)},
            "wwww": {}, "usls": {2: "fpn_pos_2"}}[family]


def _sizes(geometry: TestGeometry) -> list[int]:
    return [*geometry.levels, max(geometry.grid // 2, 1)]


def build_encoder(path: Path, geometry: TestGeometry, family: str, tracker: bool = False,
                  no_mem_bias: float = sem.NO_MEM_BIAS, student: bool = False,
                  data: str | None = None) -> Path:
    """The detector (and, with ``tracker``, dual) image encoder.

    ``student`` builds it as a small student would be: 1 x 1 and 3 x 3 convolutions (SAM 3's
    encoder tensors from other arithmetic, the same brightness to a few 1e-7). ``data`` names
    the external-data file (default ``<name>_data``).
    """
    s, c, ch = geometry.input_size, geometry.channels[2], geometry.channels
    fp16 = family == "wwww"
    dtype = "float16" if fp16 else "float32"
    b = GraphBuilder("student_encoder" if student else f"{family}_vision_encoder")
    x = b.input("pixel_values", dtype, [1, 3, s, s])
    gray = _student_gray(b, x, fp16) if student else gray01_from_normalised(b, x, fp16=fp16)
    gray = b.weights(gray, (1, 1, s, s))
    names, pos = level_names(family, geometry), position_names(family)
    for i, (name, size) in enumerate(zip(names, _sizes(geometry), strict=False)):
        level = feature_map(b, gray, size, c)
        b.output(_conv_identity(b, level, c) if student else level, name, dtype,
                 [1, c, size, size])
        if i in pos:
            b.output(b.Identity(b.const(sem.cell_centres_map(s, size, c))), pos[i], dtype,
                     [1, c, size, size])
    if tracker:
        for i, (size, n) in enumerate(zip(geometry.levels, ch, strict=True)):
            fmap = feature_map(b, gray, size, n)
            if i == 2:  # Hugging Face adds no_mem_embed inside the encoder
                bias = np.zeros((1, n, 1, 1), np.float32)
                bias[0, 1] = no_mem_bias
                fmap = b.Add(fmap, b.const(bias))
            b.output(fmap, f"image_embeddings.{i}", dtype, [1, n, size, size])
    return b.save(path, external_data=data or path.name + "_data")


def _student_gray(b: GraphBuilder, x: str, fp16: bool) -> str:
    """A 1 x 1 convolution: RGB in [-1, 1] -> brightness in [0, 1]."""
    x = b.Cast(x, to=1) if fp16 else x
    w = np.full((1, 3, 1, 1), 0.5 / 3.0, np.float32)
    return b.Conv(x, b.const(w), b.const(np.array([0.5], np.float32)))


def _conv_identity(b: GraphBuilder, x: str, channels: int) -> str:
    """A 3 x 3 convolution that keeps each channel (centre tap 1)."""
    w = np.zeros((channels, channels, 3, 3), np.float32)
    w[np.arange(channels), np.arange(channels), 1, 1] = 1.0
    return b.Conv(x, b.const(w), pads=[1, 1, 1, 1])


def build_text(path: Path, family: str, external: bool = True) -> Path:
    """The text encoder (``"usls"`` adds a ``text_mask`` bool output, True = token)."""
    if family != "usls":
        return build_hf_text(path, TEXT_CHANNELS, data=path.name + "_data" if external else None)
    build_hf_text(path, TEXT_CHANNELS)
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(path)
    model.graph.node.append(helper.make_node("Cast", ["attention_mask"], ["text_mask"],
                                             to=TensorProto.BOOL))
    model.graph.output.append(helper.make_tensor_value_info("text_mask", TensorProto.BOOL,
                                                            [1, CONTEXT]))
    onnx.save(model, path)
    return path


def _position_penalty(b: GraphBuilder, pos: str, geometry: TestGeometry) -> str:
    """``[1]``: 50 x mean |channel 0 - the expected cell-centre x| / S."""
    s, g, c = geometry.input_size, geometry.grid, geometry.channels[2]
    want = sem.cell_centres_map(s, g, c)[0, 0].ravel()
    flat = b.Reshape(channel0(b, pos, 1), ints(b, g * g))
    err = b.ReduceMean(b.Abs(b.Sub(flat, b.const(want))), keepdims=1)
    return b.Mul(err, b.const([50.0 / s]))


def build_detector(path: Path, geometry: TestGeometry, family: str, presence: str,
                   external: bool = True, boxes: bool = False) -> Path:
    """The DETR head with the toy detector.

    ``presence`` is ``"output"``, ``"none"`` (folded into the logits), ``"constant"`` (an
    initializer) or ``"shape-zero"`` (zeros shaped from an input's shape).

    ``boxes`` adds ``Sam3Model``'s exemplar inputs ``input_boxes [1,K,4]`` cxcywh and
    ``input_boxes_labels [1,K]`` int64 (1 positive, 0 negative, -10 unused), dynamic K.
    """
    levels, c, q = geometry.levels, geometry.channels[2], QUERY_SIDE * QUERY_SIDE
    big = levels[0]
    b = GraphBuilder(path.stem)
    names = level_names(family, geometry)[:3]
    fpn0 = b.input(names[0], "float32", [1, c, levels[0], levels[0]])
    for name, size in zip(names[1:], levels[1:], strict=True):
        b.input(name, "float32", [1, c, size, size])
    penalty = None
    if 2 in position_names(family):
        pos = b.input(position_names(family)[2], "float32", [1, c, levels[2], levels[2]])
        penalty = _position_penalty(b, pos, geometry)
    feat = b.input("text_features", "float32", [1, CONTEXT, TEXT_CHANNELS])
    if family == "hf":
        mask = b.input("attention_mask", I64, [1, CONTEXT])
    else:
        mask = b.input("text_mask", "bool", [1, CONTEXT])
    exemplars = None
    if boxes:
        coords = b.Reshape(b.input("input_boxes", "float32", [1, "num_boxes", 4]),
                           ints(b, -1, 4))
        labs = b.Cast(b.Reshape(b.input("input_boxes_labels", I64, [1, "num_boxes"]),
                                ints(b, -1)), to=1)
        unused = b.Cast(b.Equal(labs, b.const(-10.0)), to=1)
        exemplars = (coords, b.Cast(b.Equal(labs, b.const(1.0)), to=1), unused)
    if family == "usls":  # geometry rows are exemplar slots (see build_geometry_encoder)
        rows = b.Reshape(b.input("prompt_features", "float32", [1, "num_prompts", GEO_CHANNELS]),
                         ints(b, -1, GEO_CHANNELS))
        valid = b.Cast(b.Reshape(b.input("prompt_mask", "bool", [1, "num_prompts"]),
                                 ints(b, -1)), to=1)
        boxes = b.Slice(rows, ints(b, 0), ints(b, 4), ints(b, 1))
        labels = b.Reshape(b.Slice(rows, ints(b, 4), ints(b, 5), ints(b, 1)), ints(b, -1))
        exemplars = (boxes, labels, b.Sub(b.const(1.0), valid))
        # a row marked valid with no box (a text-only search sent with the wrong polarity)
        area = b.Reshape(b.Mul(b.Slice(boxes, ints(b, 2), ints(b, 3), ints(b, 1)),
                               b.Slice(boxes, ints(b, 3), ints(b, 4), ints(b, 1))), ints(b, -1))
        empty = b.Mul(valid, b.Cast(b.LessOrEqual(area, b.const(0.0)), to=1))
        bad = b.Mul(b.ReduceSum(empty, keepdims=1), b.const([50.0]))
        penalty = bad if penalty is None else b.Add(penalty, bad)
    det = toy_detector(b, brightness_flat(b, fpn0, big), hf_text_level(b, feat, mask), big,
                       exemplars=exemplars, penalty=penalty if presence != "none" else None)
    logits = det["logits"]
    if presence == "none":  # no presence head: what it would say goes into the logits
        absent = b.Relu(b.Neg(b.Reshape(det["presence"], ints(b, 1))))
        logits = b.Sub(logits, b.Mul(absent, b.const([20.0])))
        if penalty is not None:
            logits = b.Sub(logits, penalty)
    masks = b.weights(det["mask_logits"], (q, big * big))
    b.output(b.Reshape(logits, ints(b, 1, q)), "pred_logits", "float32", [1, q])
    b.output(b.Reshape(det["boxes"], ints(b, 1, q, 4)), "pred_boxes", "float32", [1, q, 4])
    b.output(b.Reshape(masks, ints(b, 1, q, big, big)), "pred_masks", "float32",
             [1, q, big, big])
    if presence == "output":
        b.output(b.Reshape(det["presence"], ints(b, 1, 1)), "presence_logits", "float32", [1, 1])
    elif presence == "constant":
        b.output(b.Identity(b.const(np.zeros((1, 1), np.float32))), "presence_logits",
                 "float32", [1, 1])
    elif presence == "shape-zero":  # zeros(batch, 1), as a tracer writes it: still a constant
        batch = b.Slice(b.Shape(feat), ints(b, 0), ints(b, 1), ints(b, 0))
        b.output(b.ConstantOfShape(b.Concat(batch, ints(b, 1), axis=0)), "presence_logits",
                 "float32", [1, 1])
    if family == "wwww":
        b.output(b.Reshape(det["pixel"], ints(b, 1, 1, big, big)), "semantic_seg", "float32",
                 [1, 1, big, big])
    return b.save(path, external_data=path.name + "_data" if external else None)


def build_danilobukvic(folder: Path, geometry: TestGeometry = SMALL) -> Path:
    """``vision_encoder``, ``text_encoder``, ``decoder`` (text only)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_encoder(folder / DANI[0], geometry, "hf")
    build_text(folder / DANI[1], "hf")
    build_detector(folder / DANI[2], geometry, "hf", presence="none")
    return folder


def build_wwww(folder: Path, geometry: TestGeometry = SMALL) -> Path:
    """``vision_fp16`` (dual), ``text_fp16``, ``detector``, ``prompt_encoder_mask_decoder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_encoder(folder / WWWW[0], geometry, "wwww", tracker=True)
    build_text(folder / WWWW[1], "wwww")
    build_detector(folder / WWWW[2], geometry, "wwww", presence="output")
    build_hf_decoder(folder / HF_DECODER, geometry)
    return folder


def build_geti(folder: Path, geometry: TestGeometry = SMALL, presence: str = "constant") -> Path:
    """The Geti ``onnx/`` folder: presence a constant 0 and a geometry encoder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    build_encoder(folder / GETI[0], geometry, "usls")
    build_text(folder / GETI[1], "usls")
    build_detector(folder / GETI[2], geometry, "usls", presence=presence)
    build_geometry_encoder(folder / GETI[3], geometry)
    return folder


def build_geometry_encoder(path: Path, geometry: TestGeometry) -> Path:
    """``geometry-encoder``: one row per box, ``cx, cy, w, h, label`` (+ 0), mask True = valid.

    The box rows are zeroed unless ``fpn_pos_2`` is the right encoding (so the adapter must feed
    it), and a label of -10 (Hugging Face's padding) marks a row invalid.
    """
    c, g = geometry.channels[2], geometry.grid
    b = GraphBuilder("geometry_encoder")
    b.input("fpn_feat_2", "float32", [1, c, g, g])
    pos = b.input("fpn_pos_2", "float32", [1, c, g, g])
    boxes = b.Reshape(b.input("input_boxes", "float32", [1, "n", 4]), ints(b, -1, 4))
    labels = b.Cast(b.Reshape(b.input("input_boxes_labels", I64, [1, "n"]), ints(b, -1, 1)),
                    to=1)
    b.input("input_points", "float32", [1, "m", 2])
    b.input("input_points_labels", I64, [1, "m"])
    right = b.Cast(b.Less(_position_penalty(b, pos, geometry), b.const([0.01])), to=1)
    rows = b.Mul(b.Concat(boxes, labels, b.Mul(labels, b.const(0.0)), axis=1), right)
    b.output(b.Unsqueeze(rows, ints(b, 0)), "geometry_features", "float32",
             [1, "n", GEO_CHANNELS])
    valid = b.Not(b.Equal(b.Reshape(labels, ints(b, 1, -1)), b.const(-10.0)))
    b.output(valid, "geometry_mask", "bool", [1, "n"])
    return b.save(path)


def build_dual(folder: Path, geometry: TestGeometry = sem.MEMORY_SMALL, memory: bool = False,
               student: bool = False, hf_decoder: bool = True, mission: bool = False) -> Path:
    """The parodiniccolo dual encoder + danilobukvic's text encoder and decoder + tracker graphs.

    ``hf_decoder`` adds onnx-community's ``prompt_encoder_mask_decoder``; ``memory`` the
    jax-image-tools ``mask_decoder``, memory graphs and ``constants.json``
    (:func:`~napari_sam3_onnx.testing.jax_video.build_jax_video`, its vision encoder removed).
    ``student`` makes the encoder a convolutional student (:func:`build_encoder`).
    ``mission`` writes the files under the names the ``public-mission`` registry entry gives
    them (:data:`MISSION_FILES`, the encoder's weights in ``.onnx.data``), without the
    onnx-community decoder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if memory:
        build_jax_video(folder, geometry)
        for name in ("vision_encoder.onnx", "vision_encoder.onnx_data"):
            (folder / name).unlink()
    encoder = STUDENT_ENCODER if student else DUAL_ENCODER
    build_encoder(folder / encoder, geometry, "hf", tracker=True, student=student,
                  data=encoder + ".data" if mission else None)
    text, detector = MISSION_FILES if mission else DANI[1:]
    build_text(folder / text, "hf", external=not mission)
    build_detector(folder / detector, geometry, "hf", presence="none", external=not mission)
    if hf_decoder and not mission:
        build_hf_decoder(folder / HF_DECODER, geometry)
    return folder

