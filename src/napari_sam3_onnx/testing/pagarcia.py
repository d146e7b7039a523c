"""Test graphs with the ``pagarcia/sam3-onnx-cpp`` tracker-bundle layout.

Names, dtypes and ranks follow docs/layouts.md#pagarcia-tracker and the exporter's file
naming (``<base><variant>.onnx``, default variant ``_single``): the onnx-community
``vision_encoder`` (``pixel_values`` -> ``image_embeddings.0/.1/.2``), ``image_decoder``
(multimask, M = 3), ``image_decoder_singlemask`` (M = 1), their ``image_decoder_mask*`` twins with
``mask_inputs``, ``memory_encoder``, ``memory_attention`` (static memory sizes by default, as
shipped) and ``video_constants.npz``. Semantics: :mod:`napari_sam3_onnx.toy.memory`; the best
multimask output is token 2 (:data:`~napari_sam3_onnx.toy.semantics.IOUS`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..toy import memory as sem
from ..toy.builder import GraphBuilder
from ..toy.geometry import TestGeometry
from ..toy.semantics import IOUS, feature_map, gray01_from_normalised

ENCODER = "vision_encoder.onnx"
DECODERS = {"multi": "image_decoder", "single": "image_decoder_singlemask",
            "mask_multi": "image_decoder_mask", "mask_single": "image_decoder_mask_singlemask"}


def build_pagarcia(
    folder: Path,
    geometry: TestGeometry = sem.MEMORY_SMALL,
    variant: str = "_single",
    decoders: Iterable[str] = tuple(DECODERS),
    memory: bool = True,
    constants: bool = True,
    max_mem_frames: int | None = 2,
    max_obj_ptrs: int | None = 16,
    no_mem_bias: float = sem.NO_MEM_BIAS,
    pads: bool = True,
) -> Path:
    """Write the bundle into ``folder`` (created) and return it.

    Parameters
    ----------
    decoders : iterable of {"multi", "single", "mask_multi", "mask_single"}
        Which decoder variants to write.
    memory, constants : bool
        Write the two memory graphs / the ``video_constants`` npz.
    pads : bool
        The decoders append SAM's padding point themselves, as the real export (upstream's
        ``_forward_sam_heads`` traced) does; either way their masks shrink when no label -1
        point reaches the head.
    max_mem_frames, max_obj_ptrs : int or None
        Static memory sizes of the memory attention (None: dynamic axes).
    no_mem_bias : float
        Channel-1 value of ``no_mem_embed_bchw``.
    """
    sem.check_geometry(geometry)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    s, (l0, l1, g), ch = geometry.input_size, geometry.levels, geometry.channels

    enc = GraphBuilder("pagarcia_vision_encoder")
    x = enc.input("pixel_values", "float32", [1, 3, s, s])
    gray = enc.weights(gray01_from_normalised(enc, x), (1, 1, s, s))
    for i, (size, c) in enumerate(zip((l0, l1, g), ch, strict=True)):
        enc.output(feature_map(enc, gray, size, c), f"image_embeddings.{i}", "float32",
                   [1, c, size, size])
    enc.save(folder / ENCODER, external_data=ENCODER + "_data")

    for kind in decoders:
        _decoder(geometry, "mask" in kind, kind.endswith("single"), pads).save(
            folder / f"{DECODERS[kind]}{variant}.onnx")
    if memory:
        _memory_encoder(geometry).save(folder / f"memory_encoder{variant}.onnx")
        _memory_attention(geometry, max_mem_frames, max_obj_ptrs).save(
            folder / f"memory_attention{variant}.onnx")
    if constants:
        no_mem = np.zeros((1, ch[2], 1, 1), np.float32)
        no_mem[0, 1] = no_mem_bias
        pos = sem.cell_centres_map(s, g, ch[2]).reshape(ch[2], g * g).T[:, None, :]
        ints = {"num_maskmem": 7, "max_obj_ptrs": 16, "max_cond_frames_in_attn": 4,
                "keep_first_cond_frame": 0, "memory_temporal_stride_for_eval": 1,
                "use_memory_selection": 0, "export_max_mem_frames": max_mem_frames or 7,
                "export_max_obj_ptrs": max_obj_ptrs or 16}
        arrays: dict[str, Any] = {k: np.array([v], np.int64) for k, v in ints.items()}
        np.savez(folder / f"video_constants{variant}.npz", no_mem_embed_bchw=no_mem,
                 current_vision_pos_embed=np.ascontiguousarray(pos, np.float32),
                 mf_threshold=np.array([0.01], np.float32), **arrays)
    return folder


def _decoder(geometry: TestGeometry, with_mask: bool, single: bool, pads: bool) -> GraphBuilder:
    s, (l0, l1, g), ch = geometry.input_size, geometry.levels, geometry.channels
    dec = GraphBuilder("pagarcia_image_decoder")
    pts = dec.input("point_coords", "float32", [1, "num_points", 2])
    lab = dec.input("point_labels", "int32", [1, "num_points"])
    top = dec.input("image_embed", "float32", [1, ch[2], g, g])
    hr0 = dec.input("high_res_feats_0", "float32", [1, ch[0], l0, l0])
    dec.input("high_res_feats_1", "float32", [1, ch[1], l1, l1])
    mask = None
    if with_mask:
        mask = dec.Reshape(dec.input("mask_inputs", "float32", [1, 1, l0, l0]),
                           dec.const([l0 * l0], "int64"))
    points = dec.Reshape(pts, dec.const([-1, 2], "int64"))
    labels = dec.Cast(dec.Reshape(lab, dec.const([-1], "int64")), to=1)
    if pads:
        points, labels = sem.pad_prompt(dec, points, labels)
    tokens = (0,) if single else (1, 2, 3)
    logits, iou, obj, ptr = sem.tracker_head(dec, hr0, top, points, labels, geometry, tokens,
                                             mask_input=mask, needs_padding=True)
    m = len(tokens)
    best = int(np.argmax([IOUS[t] for t in tokens]))
    multi = dec.Reshape(logits, dec.const([1, m, l0, l0], "int64"))
    chosen = dec.Gather(multi, dec.const([best], "int64"), axis=1)
    dec.output(dec.Reshape(ptr, dec.const([1, ch[2]], "int64")), "obj_ptr", "float32",
               [1, ch[2]])
    dec.output(chosen, "pred_mask", "float32", [1, 1, l0, l0])
    dec.output(dec.resize_to(chosen, (s, s), (1, 1)), "pred_mask_high_res", "float32",
               [1, 1, s, s])
    dec.output(dec.Reshape(obj, dec.const([1, 1], "int64")), "object_score_logits", "float32",
               [1, 1])
    dec.output(dec.Reshape(iou, dec.const([1, m], "int64")), "iou_scores", "float32", [1, m])
    dec.output(multi, "pred_multimasks", "float32", [1, m, l0, l0])
    dec.output(dec.resize_to(multi, (s, s), (1, m)), "pred_multimasks_high_res", "float32",
               [1, m, s, s])
    return dec


def _memory_encoder(geometry: TestGeometry) -> GraphBuilder:
    s, g, c, cm = geometry.input_size, geometry.grid, geometry.channels[2], sem.MEM_CHANNELS
    b = GraphBuilder("pagarcia_memory_encoder")
    mask = b.input("pred_mask_high_res", "float32", [1, 1, s, s])
    feat = b.input("current_vision_feat", "float32", [1, c, g, g])
    score = b.input("object_score_logits", "float32", [1, 1])
    flag = b.input("is_mask_from_points", "float32", [1])
    feats, pos = sem.memory_encoder_core(b, mask, feat, flag, geometry,
                                         score=b.Reshape(score, b.const([1], "int64")))
    b.output(feats, "maskmem_features", "float32", [1, cm, g, g])
    b.output(pos, "maskmem_pos_enc", "float32", [1, cm, g, g])
    return b


def _memory_attention(
    geometry: TestGeometry, frames: int | None, pointers: int | None
) -> GraphBuilder:
    g, c, cm = geometry.grid, geometry.channels[2], sem.MEM_CHANNELS
    nm, npt = frames or "num_mem_frames", pointers or "num_obj_ptrs"
    b = GraphBuilder("pagarcia_memory_attention")
    cur = b.input("current_vision_feat", "float32", [1, c, g, g])
    pos = b.input("current_vision_pos_embed", "float32", [g * g, 1, c])
    ptrs = b.input("memory_obj_ptrs", "float32", [npt, c])
    b.input("memory_obj_tpos", "float32", [npt])
    feats = b.input("memory_mask_feats", "float32", [nm, cm, g, g])
    b.input("memory_mask_pos", "float32", [nm, cm, g, g])
    rows = b.input("memory_mask_tpos_idx", "int64", [nm])
    values = b.ReduceMean(feats, b.const([2, 3], "int64"), keepdims=0)  # [M, C_m]
    rows_f = b.Unsqueeze(b.Cast(rows, to=1), b.const([1], "int64"))
    tokens = b.Reshape(ptrs, b.const([-1, cm], "int64"))
    fused = sem.attention_core(b, cur, sem.tokens_to_map(b, pos, c, g), values, rows_f, tokens,
                               geometry)
    b.output(fused, "fused_feat", "float32", [1, c, g, g])
    return b
