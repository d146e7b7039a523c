"""Test graphs with this project's own ``nso-sam3`` layout (``napari_sam3_onnx.export``).

Names, dtypes and ranks are those the exporter writes (docs/export.md), at test sizes. The
semantics reuse the memory toys (:mod:`napari_sam3_onnx.toy.memory`) and the toy detector
(:mod:`napari_sam3_onnx.toy.concepts`):

* ``image_encoder``: brightness in channel 0 of every output (``det_fpn_0..2``,
  ``trk_feat_0..2``);
* ``prompt_decoder``: the toy tracker head over tokens 0-3 (``masks [1,4,L,L]``,
  ``iou_scores`` = :data:`~napari_sam3_onnx.toy.semantics.IOUS`); with ``has_mask_input``
  1 the mask prompt is used, else not. ``object_pointers [1,4,C]``: token ``k``'s pointer is the
  object score **+ k** in every channel, so which token's pointer an adapter picked shows;
* ``language_encoder``: ``tokens`` -> ``text_features [32,1,4]`` (token levels in channel 0),
  ``text_mask`` (True = id 0); ``concept_detector``: the toy detector with ``slots`` exemplar
  slots (``exemplar_*`` inputs), raw heads named as exported;
* ``memory_encoder``: the toy memory encoder on the low-res ``mask_logits`` upsampled to the
  input size; ``memory_attention``: the toy attention (rows from ``memory_rows``; the current
  position map is the constant cell-centre map); ``pointer_tpos`` is declared and unused;
* ``constants.npz``: ``no_mem_embed`` = :data:`~napari_sam3_onnx.toy.memory.NO_MEM_BIAS` in
  channel 1, ``maskmem_pos_enc`` = the cell-centre map, the bank settings; ``manifest.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from . import memory as sem
from .builder import GraphBuilder
from .concepts import (
    CONTEXT,
    QUERY_SIDE,
    ints,
    pad_last,
    token_levels,
    toy_detector,
    upstream_text_level,
    xyxy_to_cxcywh,
)
from .geometry import TestGeometry
from .semantics import brightness_flat, feature_map, gray01_from_normalised

FILES = {"encoder": "image_encoder.onnx", "language": "language_encoder.onnx",
         "detector": "concept_detector.onnx", "decoder": "prompt_decoder.onnx",
         "memory_encoder": "memory_encoder.onnx", "memory_attention": "memory_attention.onnx"}
TEXT_CHANNELS = 4
#: Detector channel count of the toy (only channel 0 carries data).
DET_CHANNELS = 2


def build_nso(
    folder: Path,
    geometry: TestGeometry = sem.MEMORY_SMALL,
    slots: int = 4,
    concepts: bool = True,
    memory: bool = True,
    constants: bool = True,
    detector: Callable[[TestGeometry, int], GraphBuilder] | None = None,
    pads: bool = True,
    refine: Callable | None = None,
) -> Path:
    """Write a toy ``nso-sam3`` bundle into ``folder`` (created) and return it.

    ``detector(geometry, slots)`` replaces the cell-grid concept detector (same inputs and
    outputs), e.g. :func:`~napari_sam3_onnx.toy.bundle.blob_detector`. With ``pads`` the
    prompt decoder appends SAM's padding point itself, as the real export does (its prompt
    encoder runs with ``boxes=None``); its masks shrink without a label -1 point.
    ``refine(b, logits, iou, obj, brightness, points, labels, geometry)`` -> ``(logits, iou,
    obj)`` rewrites the decoder's ``[4, L*L]`` logits, ``[4]`` IoUs and ``[1]`` object score
    (e.g. :func:`~napari_sam3_onnx.toy.head.blob_refine`).
    """
    sem.check_geometry(geometry)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _encoder(geometry).save(folder / FILES["encoder"])
    _decoder(geometry, pads, refine).save(folder / FILES["decoder"])
    if concepts:
        _language().save(folder / FILES["language"])
        (detector or _detector)(geometry, slots).save(folder / FILES["detector"])
    if memory:
        _memory_encoder(geometry).save(folder / FILES["memory_encoder"])
        _memory_attention(geometry).save(folder / FILES["memory_attention"])
    if constants:
        s, g, c, cm = (geometry.input_size, geometry.grid, geometry.channels[2],
                       sem.MEM_CHANNELS)
        no_mem = np.zeros(c, np.float32)
        no_mem[1] = sem.NO_MEM_BIAS
        np.savez(folder / "constants.npz", no_mem_embed=no_mem,
                 maskmem_pos_enc=sem.cell_centres_map(s, g, cm)[0],
                 maskmem_tpos_enc=sem.temporal_table(7, cm),
                 no_obj_ptr=np.zeros(c, np.float32), no_obj_embed_spatial=np.zeros(cm, np.float32),
                 obj_ptr_tpos_proj_weight=np.zeros((cm, c), np.float32),
                 obj_ptr_tpos_proj_bias=np.zeros(cm, np.float32),
                 num_maskmem=np.int64(7), max_obj_ptrs=np.int64(16),
                 max_cond_frames_in_attn=np.int64(4), keep_first_cond_frame=np.bool_(False),
                 memory_temporal_stride_for_eval=np.int64(1),
                 use_memory_selection=np.bool_(False), mf_threshold=np.float32(0.01))
    manifest = {"layout": "nso-sam3", "version": 1, "precision": "fp32",
                "graphs": {k: v for k, v in FILES.items() if (folder / v).is_file()},
                "constants": "constants.npz", "source": {"toy": True}}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return folder


def _encoder(geometry: TestGeometry) -> GraphBuilder:
    s, levels, ch = geometry.input_size, geometry.levels, geometry.channels
    b = GraphBuilder("nso_image_encoder")
    gray = b.weights(gray01_from_normalised(b, b.input("pixel_values", "float32",
                                                       [1, 3, s, s])), (1, 1, s, s))
    for i, size in enumerate(levels):
        b.output(feature_map(b, gray, size, DET_CHANNELS), f"det_fpn_{i}", "float32",
                 [1, DET_CHANNELS, size, size])
    for i, (size, c) in enumerate(zip(levels, ch, strict=True)):
        b.output(feature_map(b, gray, size, c), f"trk_feat_{i}", "float32", [1, c, size, size])
    return b


def _decoder(geometry: TestGeometry, pads: bool, refine: Callable | None = None
             ) -> GraphBuilder:
    (l0, l1, g), ch = geometry.levels, geometry.channels
    b = GraphBuilder("nso_prompt_decoder")
    top = b.input("image_embed", "float32", [1, ch[2], g, g])
    hr0 = b.input("trk_feat_0", "float32", [1, ch[0], l0, l0])
    b.input("trk_feat_1", "float32", [1, ch[1], l1, l1])
    pts = b.input("point_coords", "float32", [1, "num_points", 2])
    lab = b.input("point_labels", "int32", [1, "num_points"])
    mask = b.Reshape(b.input("mask_input", "float32", [1, 1, l0, l0]), ints(b, l0 * l0))
    has = b.input("has_mask_input", "float32", [1])
    points = b.Reshape(pts, ints(b, -1, 2))
    labels = b.Cast(b.Reshape(lab, ints(b, -1)), to=1)
    if pads:
        points, labels = sem.pad_prompt(b, points, labels)
    tokens = (0, 1, 2, 3)
    with_mask = sem.tracker_head(b, hr0, top, points, labels, geometry, tokens, mask_input=mask,
                                 needs_padding=True)
    without = sem.tracker_head(b, hr0, top, points, labels, geometry, tokens, needs_padding=True)
    use = b.Greater(has, b.const([0.5]))
    logits, iou, obj, ptr = (b.Where(use, a, z) for a, z in zip(with_mask, without,
                                                                  strict=True))
    if refine is not None:
        logits, iou, obj = refine(b, logits, iou, obj, brightness_flat(b, hr0, l0), points,
                                  labels, geometry)
    b.output(b.Reshape(logits, ints(b, 1, 4, l0, l0)), "masks", "float32", [1, 4, l0, l0])
    b.output(b.Reshape(iou, ints(b, 1, 4)), "iou_scores", "float32", [1, 4])
    b.output(b.Reshape(obj, ints(b, 1, 1)), "object_score_logits", "float32", [1, 1])
    offsets = b.const(np.arange(4, dtype=np.float32).reshape(1, 4, 1))
    ptrs = b.Add(b.Reshape(ptr, ints(b, 1, 1, ch[2])), offsets)
    b.output(ptrs, "object_pointers", "float32", [1, 4, ch[2]])
    return b


def _language() -> GraphBuilder:
    b = GraphBuilder("nso_language_encoder")
    tok = b.input("tokens", "int64", [1, CONTEXT])
    seq = b.Transpose(b.Unsqueeze(token_levels(b, tok), ints(b, 2)), perm=[1, 0, 2])
    b.output(pad_last(b, seq, 3, TEXT_CHANNELS), "text_features", "float32",
             [CONTEXT, 1, TEXT_CHANNELS])
    b.output(b.Equal(tok, b.const([0], "int64")), "text_mask", "bool", [1, CONTEXT])
    return b


def _detector(geometry: TestGeometry, slots: int, queries: Callable | None = None
              ) -> GraphBuilder:
    """The toy concept detector (cell-grid queries unless ``queries`` is given).

    ``queries(b, brightness, level, L)`` -> ``(member, logits)`` replaces the cell grid (see
    :func:`~napari_sam3_onnx.toy.concepts.toy_detector`).
    """
    levels = geometry.levels
    big, q = levels[0], QUERY_SIDE * QUERY_SIDE
    b = GraphBuilder("nso_concept_detector")
    fpn0 = b.input("det_fpn_0", "float32", [1, DET_CHANNELS, big, big])
    for i in (1, 2):
        b.input(f"det_fpn_{i}", "float32", [1, DET_CHANNELS, levels[i], levels[i]])
    feat = b.input("text_features", "float32", [CONTEXT, 1, TEXT_CHANNELS])
    mask = b.input("text_mask", "bool", [1, CONTEXT])
    coords = b.input("exemplar_boxes", "float32", [slots, 1, 4])
    labels = b.input("exemplar_labels", "int64", [slots, 1])
    pads = b.input("exemplar_padding", "bool", [1, slots])
    ex = (b.Reshape(coords, ints(b, -1, 4)), b.Cast(b.Reshape(labels, ints(b, -1)), to=1),
          b.Cast(b.Reshape(pads, ints(b, -1)), to=1))
    bright, level = brightness_flat(b, fpn0, big), upstream_text_level(b, mask, feat)
    det = toy_detector(b, bright, level, big, exemplars=ex,
                       queries=None if queries is None else queries(b, bright, level, big))
    b.output(b.Reshape(det["logits"], ints(b, 1, q, 1)), "pred_logits", "float32", [1, q, 1])
    b.output(b.Reshape(xyxy_to_cxcywh(b, det["boxes"]), ints(b, 1, q, 4)), "pred_boxes",
             "float32", [1, q, 4])
    b.output(b.Reshape(det["mask_logits"], ints(b, 1, q, big, big)), "pred_masks", "float32",
             [1, q, big, big])
    b.output(b.Reshape(det["presence"], ints(b, 1, 1)), "presence_logit", "float32", [1, 1])
    return b


def _memory_encoder(geometry: TestGeometry) -> GraphBuilder:
    s, l0, g, c = geometry.input_size, geometry.mask_size, geometry.grid, geometry.channels[2]
    b = GraphBuilder("nso_memory_encoder")
    feat = b.input("trk_feat_2", "float32", [1, c, g, g])
    low = b.input("mask_logits", "float32", [1, 1, l0, l0])
    score = b.input("object_score_logits", "float32", [1, 1])
    flag = b.Cast(b.input("is_mask_from_points", "bool", [1]), to=1)
    feats, _pos = sem.memory_encoder_core(b, b.resize_to(low, (s, s), (1, 1)), feat, flag,
                                          geometry, score=b.Reshape(score, ints(b, 1)))
    b.output(feats, "memory_feat", "float32", [1, sem.MEM_CHANNELS, g, g])
    return b


def _memory_attention(geometry: TestGeometry) -> GraphBuilder:
    s, g, c, cm = geometry.input_size, geometry.grid, geometry.channels[2], sem.MEM_CHANNELS
    b = GraphBuilder("nso_memory_attention")
    cur = b.input("trk_feat_2", "float32", [1, c, g, g])
    feats = b.input("memory_feats", "float32", ["num_memories", cm, g, g])
    rows = b.input("memory_rows", "int64", ["num_memories"])
    ptrs = b.input("pointers", "float32", ["num_pointers", c])
    b.input("pointer_tpos", "float32", ["num_pointers"])
    values = b.ReduceMean(feats, ints(b, 2, 3), keepdims=0)
    rows_f = b.Unsqueeze(b.Cast(rows, to=1), ints(b, 1))
    tokens = b.Reshape(ptrs, ints(b, -1, cm))
    pos = b.const(sem.cell_centres_map(s, g, c))
    fused = sem.attention_core(b, cur, pos, values, rows_f, tokens, geometry)
    b.output(fused, "conditioned_feat", "float32", [1, c, g, g])
    return b
