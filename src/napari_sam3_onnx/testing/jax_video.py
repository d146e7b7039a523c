"""Test graphs with the ``jax-image-tools`` video layout (four graphs + ``constants.json``).

Names follow docs/layouts.md#jax-video (the names seen in programs that run
the EdgeTAM sibling): ``vision_encoder`` (``pixel_values`` -> ``feats0``, ``feats1``, ``feats2``,
``pos0``, ``pos1``, ``pos2``; ``pos2`` at output index 5), ``mask_decoder`` (``feats0..2``,
``input_points [1,1,N,2]``, ``input_labels [1,1,N]`` int32 -> ``pred_masks [1,1,3,L,L]``,
``high_res_masks [1,1,3,S,S]``, ``iou_scores [1,1,3]``, ``object_pointer [1,1,C]``,
``object_score_logits [1,1,1]``; multimask only), ``memory_encoder`` (``vision_features``,
``pred_masks_high_res``, ``is_mask_from_pts`` bool -> ``memory_tokens``/``memory_pos_enc``
``[T,1,C_m]``) and ``memory_attention`` with dynamic ``spatial_memory`` / ``pointer_memory``
-> ``conditioned_features [1,1,T,C]``.

``constants.json`` holds ``image_mean`` / ``image_std`` (ImageNet values here, on purpose, so a
caller that assumes SAM 3's 0.5 gets wrong brightness), ``memory_temporal_positional_encoding``
(:func:`~napari_sam3_onnx.toy.memory.temporal_table`) and, unless disabled, the
``no_mem_embed`` the adapter assumes may live there. Semantics:
:mod:`napari_sam3_onnx.toy.memory`; position encodings ``pos0..2`` carry each cell's centre
``x`` / ``y`` (pixels) in channels 0 / 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..toy import memory as sem
from ..toy.builder import GraphBuilder
from ..toy.geometry import TestGeometry
from ..toy.semantics import feature_map

FILES = ("vision_encoder.onnx", "mask_decoder.onnx", "memory_encoder.onnx",
         "memory_attention.onnx")
IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)


def build_jax_video(
    folder: Path,
    geometry: TestGeometry = sem.MEMORY_SMALL,
    memory: bool = True,
    constants: bool = True,
    no_mem_embed: bool = True,
    no_mem_bias: float = sem.NO_MEM_BIAS,
    pointer_encoding: str = "none",
    pads: bool = False,
) -> Path:
    """Write the bundle into ``folder`` (created) and return it.

    Parameters
    ----------
    memory, constants : bool
        Write the two memory graphs / ``constants.json``.
    no_mem_embed : bool
        Put a ``no_mem_embed`` entry (channel 1 = ``no_mem_bias``) into ``constants.json``.
    pointer_encoding : {"none", "constants", "underscore", "object", "graph"}
        Ship the pointer temporal projection (:func:`pointer_projection`) in ``constants.json``
        as ``obj_ptr_tpos_proj.weight/bias``, as ``obj_ptr_tpos_proj_weight/_bias``, as an
        ``obj_ptr_tpos_proj: {weight, bias}`` object, or as ``pointer_tpos.onnx``
        (:func:`build_pointer_graph`); "none" ships nothing.
    pads : bool
        The decoder appends SAM's padding point itself (:func:`napari_sam3_onnx.toy.memory.
        pad_prompt`); either way its masks shrink when no label -1 point reaches the head.
    """
    sem.check_geometry(geometry)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    s, levels, ch = geometry.input_size, geometry.levels, geometry.channels
    c, g, cm = ch[2], geometry.grid, sem.MEM_CHANNELS

    enc = GraphBuilder("jax_vision_encoder")
    x = enc.input("pixel_values", "float32", [1, 3, s, s])
    x = enc.Add(enc.Mul(x, enc.const(np.reshape(IMAGE_STD, (1, 3, 1, 1)))),
                enc.const(np.reshape(IMAGE_MEAN, (1, 3, 1, 1))))
    gray = enc.weights(enc.ReduceMean(x, enc.const([1], "int64"), keepdims=1), (1, 1, s, s))
    for i, (size, n) in enumerate(zip(levels, ch, strict=True)):
        enc.output(feature_map(enc, gray, size, n), f"feats{i}", "float32", [1, n, size, size])
    for i, size in enumerate(levels):  # image-independent, like SAM's sine encodings
        enc.output(enc.const(sem.cell_centres_map(s, size, c)), f"pos{i}", "float32",
                   [1, c, size, size])
    enc.save(folder / FILES[0], external_data=FILES[0] + "_data")

    dec = GraphBuilder("jax_mask_decoder")
    hr0 = dec.input("feats0", "float32", [1, ch[0], levels[0], levels[0]])
    dec.input("feats1", "float32", [1, ch[1], levels[1], levels[1]])
    top = dec.input("feats2", "float32", [1, c, g, g])
    pts = dec.input("input_points", "float32", [1, 1, "num_points", 2])
    lab = dec.input("input_labels", "int32", [1, 1, "num_points"])
    points = dec.Reshape(pts, dec.const([-1, 2], "int64"))
    labels = dec.Cast(dec.Reshape(lab, dec.const([-1], "int64")), to=1)
    if pads:
        points, labels = sem.pad_prompt(dec, points, labels)
    logits, iou, obj, ptr = sem.tracker_head(dec, hr0, top, points, labels, geometry, (1, 2, 3),
                                             needs_padding=True)
    lm = geometry.mask_size
    masks = dec.Reshape(logits, dec.const([1, 3, lm, lm], "int64"))
    dec.output(dec.Unsqueeze(masks, dec.const([0], "int64")), "pred_masks", "float32",
               [1, 1, 3, lm, lm])
    high = dec.Unsqueeze(dec.resize_to(masks, (s, s), (1, 3)), dec.const([0], "int64"))
    dec.output(high, "high_res_masks", "float32", [1, 1, 3, s, s])
    dec.output(dec.Reshape(iou, dec.const([1, 1, 3], "int64")), "iou_scores", "float32",
               [1, 1, 3])
    dec.output(dec.Reshape(ptr, dec.const([1, 1, c], "int64")), "object_pointer", "float32",
               [1, 1, c])
    dec.output(dec.Reshape(obj, dec.const([1, 1, 1], "int64")), "object_score_logits",
               "float32", [1, 1, 1])
    dec.save(folder / FILES[1])

    if memory:
        _memory_encoder(geometry).save(folder / FILES[2])
        _memory_attention(geometry).save(folder / FILES[3])
    if constants:
        consts = {"image_mean": list(IMAGE_MEAN), "image_std": list(IMAGE_STD),
                  "memory_temporal_positional_encoding": sem.temporal_table(7, cm).tolist()}
        if no_mem_embed:
            vec = np.zeros(c, np.float32)
            vec[1] = no_mem_bias
            consts["no_mem_embed"] = vec.tolist()
        weight, bias = pointer_projection(cm, c)
        if pointer_encoding == "constants":
            consts.update({"obj_ptr_tpos_proj.weight": weight.tolist(),
                           "obj_ptr_tpos_proj.bias": bias.tolist()})
        elif pointer_encoding == "underscore":
            consts.update({"obj_ptr_tpos_proj_weight": weight.tolist(),
                           "obj_ptr_tpos_proj_bias": bias.tolist()})
        elif pointer_encoding == "object":
            consts["obj_ptr_tpos_proj"] = {"weight": weight.tolist(), "bias": bias.tolist()}
        (folder / "constants.json").write_text(json.dumps(consts, indent=1))
    if pointer_encoding == "graph":
        build_pointer_graph(folder / "pointer_tpos.onnx", cm)
    return folder


def pointer_projection(mem_channels: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed, asymmetric ``[C_m, C]`` weight and ``[C_m]`` bias (a Linear ``C -> C_m``)."""
    weight = (np.arange(mem_channels * channels, dtype=np.float32).reshape(mem_channels, channels)
              % 7 - 3) / 4
    return weight, np.arange(1, mem_channels + 1, dtype=np.float32) / 10


def graph_pointer_rows(offsets: np.ndarray, mem_channels: int) -> np.ndarray:
    """What :func:`build_pointer_graph` returns: ``x * (j + 1) - j / 2`` in channel j."""
    j = np.arange(mem_channels, dtype=np.float32)
    return np.asarray(offsets, np.float32).reshape(-1, 1) * (j + 1) - j / 2


def build_pointer_graph(path: Path, mem_channels: int) -> Path:
    """``pointer_tpos.onnx``: offsets ``[P]`` -> ``[P, C_m]`` (:func:`graph_pointer_rows`)."""
    b = GraphBuilder("jax_pointer_tpos")
    x = b.Unsqueeze(b.input("pointer_tpos", "float32", ["num_pointers"]), b.const([1], "int64"))
    j = np.arange(mem_channels, dtype=np.float32)[None]
    rows = b.Sub(b.Mul(x, b.const(j + 1)), b.const(j / 2))
    b.output(rows, "pointer_pos", "float32", ["num_pointers", mem_channels])
    return b.save(path)


def _memory_encoder(geometry: TestGeometry) -> GraphBuilder:
    s, g, c, cm = geometry.input_size, geometry.grid, geometry.channels[2], sem.MEM_CHANNELS
    b = GraphBuilder("jax_memory_encoder")
    feat = b.input("vision_features", "float32", [1, c, g, g])
    mask = b.input("pred_masks_high_res", "float32", [1, 1, s, s])
    flag = b.Cast(b.input("is_mask_from_pts", "bool", [1]), to=1)
    feats, pos = sem.memory_encoder_core(b, mask, feat, flag, geometry)
    for src, name in ((feats, "memory_tokens"), (pos, "memory_pos_enc")):
        b.output(sem.map_to_tokens(b, src, cm, g), name, "float32", [g * g, 1, cm])
    return b


def _memory_attention(geometry: TestGeometry) -> GraphBuilder:
    g, c, cm = geometry.grid, geometry.channels[2], sem.MEM_CHANNELS
    t = g * g
    b = GraphBuilder("jax_memory_attention")
    cur = b.input("current_vision_features", "float32", [t, 1, c])
    pos = b.input("current_vision_position_embeddings", "float32", [t, 1, c])
    spatial = b.input("spatial_memory", "float32", ["num_spatial", 1, cm])
    spatial_pos = b.input("spatial_memory_position_embeddings", "float32", ["num_spatial", 1, cm])
    ptrs = b.input("pointer_memory", "float32", ["num_pointer", 1, cm])
    b.input("pointer_memory_position_embeddings", "float32", ["num_pointer", 1, cm])

    def per_memory(x: str) -> str:  # [k*T,1,C_m] -> [k,C_m] (mean over each memory's tokens)
        x = b.Reshape(x, b.const([-1, t, cm], "int64"))
        return b.ReduceMean(x, b.const([1], "int64"), keepdims=0)

    rows = sem.column(b, per_memory(spatial_pos), 3)  # temporal row (table channel 3)
    tokens = b.Reshape(ptrs, b.const([-1, cm], "int64"))
    fused = sem.attention_core(b, sem.tokens_to_map(b, cur, c, g), sem.tokens_to_map(b, pos, c, g),
                               per_memory(spatial), rows, tokens, geometry)
    out = b.Transpose(b.Reshape(fused, b.const([c, t], "int64")), perm=[1, 0])
    b.output(b.Reshape(out, b.const([1, 1, t, c], "int64")), "conditioned_features", "float32",
             [1, 1, t, c])
    return b
