"""Adapter for this project's own export layout ``nso-sam3`` (``napari_sam3_onnx.export``).

Graphs are assigned to roles by their input/output names (never by file name):

* image encoder: ``pixel_values [1,3,S,S]`` float (x/255, mean = std = 0.5) -> detector FPN
  ``det_fpn_0..2`` (256 ch) and tracker features ``trk_feat_0 [1,32,..]``, ``trk_feat_1
  [1,64,..]`` (``conv_s0/s1`` applied), ``trk_feat_2 [1,256,g,g]`` (raw ``F``): one ViT pass;
* prompt decoder: ``image_embed``, ``trk_feat_0/1``, ``point_coords [1,N,2]``, ``point_labels
  [1,N]`` int32, ``mask_input [1,1,L,L]``, ``has_mask_input [1]`` -> ``masks [1,4,L,L]`` (token 0
  single-mask, 1-3 multimask), ``iou_scores [1,4]``, ``object_score_logits [1,1]``,
  ``object_pointers [1,4,C]`` (already occlusion-gated with ``no_obj_ptr``);
* language encoder: ``tokens [1,T]`` int64, 0-padded -> ``text_features [T,1,256]``,
  ``text_mask [1,T]`` (True = pad);
* concept detector: ``det_fpn_0..2``, ``text_features``, ``text_mask``, ``exemplar_boxes [K,1,4]``
  (cxcywh), ``exemplar_labels [K,1]``, ``exemplar_padding [1,K]`` (True = unused) ->
  ``pred_logits``, ``pred_boxes`` (cxcywh), ``pred_masks`` (logits), ``presence_logit``;
* memory encoder: ``trk_feat_2``, ``mask_logits [1,1,L,L]``, ``object_score_logits``,
  ``is_mask_from_points`` -> ``memory_feat [1,C_m,g,g]``;
* memory attention: ``trk_feat_2``, ``memory_feats [M,C_m,g,g]``, ``memory_rows [M]``,
  ``pointers [P,C]``, ``pointer_tpos [P]`` (distance / (max_obj_ptrs - 1)) -> ``conditioned_feat``.

``constants.npz`` (named in ``manifest.json``) holds ``no_mem_embed`` (added here, once, on a
prompted slice), ``maskmem_pos_enc`` and the bank settings. The object pointer handed to the
engine is upstream's: the best-IoU multimask token's for <= 1 prompt point, token 0's otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from typing_extensions import override

from ..base import Capability, Detections, Embedding, MaskCandidates, SamAdapter, TextEmbedding
from ..errors import BundleFileError, LayoutMismatchError, ModelFileMissingError
from ..files import read_json, read_npz
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from . import _memory as mem
from . import _tracker_util as tu
from ._common import encode_image, fixed_dim, spatial_size
from ._concepts import as_declared, cxcywh_to_xyxy, exemplar_slots, sigmoid, slot_count, token_feed
from ._padding import decide_padding, with_padding

DET = ("det_fpn_0", "det_fpn_1", "det_fpn_2")
TRK = ("trk_feat_0", "trk_feat_1", "trk_feat_2")
ROLES = {
    "encoder": (("pixel_values",), (*DET, *TRK)),
    "decoder": (("image_embed", "trk_feat_0", "trk_feat_1", "point_coords", "point_labels",
                 "mask_input", "has_mask_input"),
                ("masks", "iou_scores", "object_score_logits", "object_pointers")),
    "language": (("tokens",), ("text_features", "text_mask")),
    "detector": ((*DET, "text_features", "text_mask", "exemplar_boxes", "exemplar_labels",
                  "exemplar_padding"),
                 ("pred_logits", "pred_boxes", "pred_masks", "presence_logit")),
    "memory_encoder": (("trk_feat_2", "mask_logits", "object_score_logits",
                        "is_mask_from_points"), ("memory_feat",)),
    "memory_attention": (("trk_feat_2", "memory_feats", "memory_rows", "pointers",
                          "pointer_tpos"), ("conditioned_feat",)),
}
CONSTANTS = "constants.npz"
#: Most clicks the batched prompt decoder gets per call. Every object repeats the image inside
#: the graph (~60 MB of fp32 intermediates each at 1008 px), so per-click time stops improving
#: beyond a few clicks while the memory grows with the batch: at full depth on a 2-core CPU,
#: 16 clicks per call cost 0.27 s per click with a 1.0 GB peak, 64 the same with 4.8 GB
#: (docs/automatic.md, "Speed").
MAX_CLICKS_PER_CALL = 8


def _find(graphs: Mapping[str, GraphSignature], role: str) -> GraphSignature | None:
    ins, outs = ROLES[role]
    for name in sorted(graphs):
        g = graphs[name]
        if set(ins) <= g.input_names and set(outs) <= g.output_names:
            return g
    return None


class NsoAdapter(SamAdapter):
    """Clicks, boxes, text, exemplars and memory with the ``nso-sam3`` bundle."""

    layout = "nso-sam3"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: the two-neck encoder and the 4-token prompt decoder."""
        roles = {r: _find(graphs, r) for r in ROLES}
        if roles["encoder"] is None or roles["decoder"] is None:
            return None
        return {r: g for r, g in roles.items() if g is not None}

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc, dec = graphs["encoder"], graphs["decoder"]
        self.encoder = LazySession(enc.path, config)
        # The decoder runs many times on same-shaped feeds: onnxruntime's CPU arena reuses its
        # buffers (without it a batch of 16 clicks cost 3x more per click, fresh pages every
        # call); the encoder keeps the config's choice (its arena raised the peak, not the speed).
        self.decoder = LazySession(dec.path, replace(config, cpu_mem_arena=True))
        self._input = enc.input("pixel_values")
        self._mask_size = spatial_size(dec.input("mask_input"), self.layout, dec.path.name)
        self._channels = fixed_dim(dec.input("image_embed"), 1, self.layout, dec.path.name)
        self._label_dtype = np.dtype(dec.input("point_labels").dtype)
        # bundles exported before the batch axis was dynamic take one object per call
        self._batched = dec.input("point_coords").shape[0] != 1
        #: Does the decoder append SAM's padding point itself? (this project's export does)
        self.padding = decide_padding(dec, "point_coords", "point_labels", True)
        self.language = self.detector = self.memory_encoder = self.memory_attention = None
        caps = {Capability.ENCODE, Capability.CLICKS, Capability.BOXES}
        if "language" in graphs and "detector" in graphs:
            self.language = LazySession(graphs["language"].path, config)
            self.detector = LazySession(graphs["detector"].path, config)
            self._slots = slot_count(graphs["detector"].input("exemplar_boxes"), 0)
            caps |= {Capability.TEXT, Capability.EXEMPLARS}
        has_att, has_enc = "memory_attention" in graphs, "memory_encoder" in graphs
        if has_att != has_enc:
            present = graphs["memory_attention" if has_att else "memory_encoder"].path
            raise ModelFileMissingError(
                present.parent, f"{present.name} is here but not the other memory graph; "
                "propagation needs both memory_encoder and memory_attention.")
        if has_att:
            self.memory_encoder = LazySession(graphs["memory_encoder"].path, config)
            self.memory_attention = LazySession(graphs["memory_attention"].path, config)
            caps.add(Capability.MEMORY)
        self._load_constants(enc.path.parent)
        self.capabilities = frozenset(caps)
        names = [*TRK]
        if self.detector is not None:
            names = [*DET, *names]
        self._encoder_outputs = tuple(names)

    def _load_constants(self, folder: Path) -> None:
        name = CONSTANTS
        manifest = folder / "manifest.json"
        if manifest.is_file():
            meta = read_json(manifest)
            name = meta.get("constants", CONSTANTS)
            if not isinstance(name, str) or not name:
                raise BundleFileError(manifest, f"'constants' should name a file, not {name!r}")
            precision = meta.get("precision")
            self.precision = precision if isinstance(precision, str) else None
        path = folder / name
        if not path.is_file():
            raise ModelFileMissingError(path, "The nso-sam3 bundle keeps no_mem_embed (needed "
                                        "for every click) and the memory settings there.")
        consts = read_npz(path)
        for key in ("no_mem_embed", "maskmem_pos_enc"):
            if key not in consts:
                raise LayoutMismatchError(self.layout, path.name, f"no '{key}' array")
        self._no_mem = consts["no_mem_embed"].astype(np.float32).reshape(1, -1, 1, 1)
        if self._no_mem.shape[1] != self._channels:
            raise LayoutMismatchError(self.layout, path.name, "no_mem_embed has "
                                      f"{self._no_mem.shape[1]} values, image_embed "
                                      f"{self._channels} channels")
        self._maskmem_pos = consts["maskmem_pos_enc"].astype(np.float32)
        self.memory_settings = mem.settings_from(consts)
        self.constants_path = path

    # ---- geometry -----------------------------------------------------------------------
    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._input, self.layout, self.encoder.path.name)

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        return self._mask_size

    @property
    @override
    def max_exemplars(self) -> int | None:
        return self._slots if self.detector is not None else None

    @property
    @override
    def context_length(self) -> int:
        self.require(Capability.TEXT)
        return fixed_dim(self.language.signature.input("tokens"), 1, self.layout,
                         self.language.path.name)

    @property
    @override
    def accepts_mask_input(self) -> bool:
        return True

    @property
    def no_mem_embed(self) -> np.ndarray:
        """``(1, C, 1, 1)`` float32 added to the raw feature on prompted slices."""
        return self._no_mem

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        out = {
            "padding": asm.padding(self.padding),
            "normalisation": asm.normalisation(self._input, self.encoder.path.name),
            "no-memory embedding": ("added to trk_feat_2 on prompted slices",
                                    f"{self.constants_path.name} no_mem_embed"),
            "mask kind": ("logits; token 0 single-mask, 1-3 multimask", "decoder outputs"),
        }
        if self.detector is not None:
            out["score cut"] = ("none (sigmoid(logit) * sigmoid(presence); caller's floor)",
                                "raw detector heads")
        if self.memory_attention is not None:
            out["pointer encoding"] = ("in the memory-attention graph (pointer_tpos = "
                                       "offset / (max_obj_ptrs - 1))",
                                       self.memory_attention.path.name)
        return out

    # ---- image path ---------------------------------------------------------------------
    @override
    def encode(self, rgb: np.ndarray) -> Embedding:
        return encode_image(self.encoder, self._input, self.layout, rgb, self._encoder_outputs)

    @override
    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        self.require(Capability.CLICKS)
        pts, labs = tu.order_prompt(points_xy, labels)
        n_points = len(labs)
        if n_points == 0:  # SAM's empty prompt (a tracked slice): one point (0, 0), label -1
            pts, labs = np.zeros((1, 2), np.float32), np.full(1, -1, np.int64)
        pts, labs = with_padding(pts, labs, self.padding)
        feats = embedding.features
        top = feats.get(mem.CONDITIONED)
        if top is None:  # a prompted slice: raw feature + no_mem_embed, added exactly once
            top = feats["trk_feat_2"] + self._no_mem
        has = mask_input is not None
        mask = (np.asarray(mask_input, np.float32).reshape(1, 1, *self._mask_size) if has
                else np.zeros((1, 1, *self._mask_size), np.float32))
        out = self.decoder.run(ROLES["decoder"][1], {
            "image_embed": np.asarray(top, np.float32), "trk_feat_0": feats["trk_feat_0"],
            "trk_feat_1": feats["trk_feat_1"], "point_coords": pts[None],
            "point_labels": labs[None].astype(self._label_dtype), "mask_input": mask,
            "has_mask_input": np.array([1.0 if has else 0.0], np.float32),
        })
        logits = out["masks"].reshape(-1, *self._mask_size).astype(np.float32)
        iou = out["iou_scores"].reshape(-1).astype(np.float32)
        pointers = out["object_pointers"].reshape(len(iou), -1).astype(np.float32)
        # Upstream: the multimask token's pointer with <= 1 point, else token 0's (always).
        k = 1 + int(np.argmax(iou[1:])) if n_points <= 1 else 0
        return MaskCandidates(logits=logits, iou=iou,
                              object_score=float(out["object_score_logits"].reshape(-1)[0]),
                              single_mask_first=True, extras={"object_pointer": pointers[k]})

    @override
    def predict_point_batch(
        self, embedding: Embedding, points_xy: np.ndarray
    ) -> list[MaskCandidates]:
        pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
        if not self._batched or len(pts) <= 1:
            return super().predict_point_batch(embedding, pts)
        self.require(Capability.CLICKS)
        return [c for s in range(0, len(pts), MAX_CLICKS_PER_CALL)
                for c in self._decode_clicks(embedding, pts[s:s + MAX_CLICKS_PER_CALL])]

    def _decode_clicks(self, embedding: Embedding, pts: np.ndarray) -> list[MaskCandidates]:
        """One batched decoder call: ``(B, 2)`` points, each its own positive click."""
        feats = embedding.features
        top = feats.get(mem.CONDITIONED)
        if top is None:
            top = feats["trk_feat_2"] + self._no_mem
        out = self.decoder.run(ROLES["decoder"][1], {
            "image_embed": np.asarray(top, np.float32), "trk_feat_0": feats["trk_feat_0"],
            "trk_feat_1": feats["trk_feat_1"], "point_coords": pts[:, None, :],
            "point_labels": np.ones((len(pts), 1), self._label_dtype),
            "mask_input": np.zeros((1, 1, *self._mask_size), np.float32),
            "has_mask_input": np.zeros(1, np.float32),
        })
        logits = out["masks"].reshape(len(pts), -1, *self._mask_size).astype(np.float32)
        iou = out["iou_scores"].reshape(len(pts), -1).astype(np.float32)
        obj = out["object_score_logits"].reshape(len(pts), -1)[:, 0]
        pointers = out["object_pointers"].reshape(len(pts), iou.shape[1], -1)
        best = 1 + np.argmax(iou[:, 1:], axis=1)  # one click: the best multimask token's
        return [MaskCandidates(logits=logits[b], iou=iou[b], object_score=float(obj[b]),
                               single_mask_first=True,
                               extras={"object_pointer": pointers[b, best[b]].astype(np.float32)})
                for b in range(len(pts))]

    # ---- concept path -------------------------------------------------------------------
    @override
    def encode_text(self, token_ids: Sequence[int], text: str = "") -> TextEmbedding:
        self.require(Capability.TEXT)
        feed = token_feed(token_ids, self.context_length, pad=0)
        out = self.language.run(ROLES["language"][1], {"tokens": feed})
        return TextEmbedding(text or " ".join(str(int(t)) for t in token_ids), out)

    @override
    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        self.require(Capability.TEXT)
        missing = [n for n in DET if n not in embedding.features]
        missing += [n for n in ("text_features", "text_mask") if n not in text.features]
        if missing:
            raise ValueError(f"The embedding or text given to the {self.layout} bundle lacks "
                             f"{missing}; encode the image and the text with this bundle.")
        coords, labels, padding = exemplar_slots(boxes_cxcywh, box_labels, self._slots,
                                                 self.layout)
        sig = self.detector.signature
        feeds = {n: embedding.features[n] for n in DET}
        feeds.update(text_features=text.features["text_features"],
                     text_mask=text.features["text_mask"],
                     exemplar_boxes=as_declared(coords[:, None, :], sig.input("exemplar_boxes")),
                     exemplar_labels=as_declared(labels[:, None], sig.input("exemplar_labels")),
                     exemplar_padding=as_declared(padding[None], sig.input("exemplar_padding")))
        out = self.detector.run(ROLES["detector"][1], feeds)
        logits = np.asarray(out["pred_logits"], np.float32).reshape(-1)
        presence = np.asarray(out["presence_logit"], np.float32).reshape(-1)[0]
        n = logits.shape[0]
        return Detections(
            scores=sigmoid(logits) * sigmoid(presence),
            boxes=cxcywh_to_xyxy(out["pred_boxes"]).reshape(n, 4),
            masks=np.asarray(out["pred_masks"], np.float32).reshape(n, *self.mask_size),
            mask_kind="logits", min_score=0.0)

    # ---- memory path --------------------------------------------------------------------
    @override
    def memory_encode(
        self,
        embedding: Embedding,
        mask_logits: np.ndarray,
        object_score: float,
        is_mask_from_points: bool,
    ) -> mem.MemoryFrame:
        # features: (C_m, g, g); pos_enc: the bundle's one constant array (shared, not copied)
        self.require(Capability.MEMORY)
        sig = self.memory_encoder.signature
        out = self.memory_encoder.run(ROLES["memory_encoder"][1], {
            "trk_feat_2": embedding.features["trk_feat_2"],
            "mask_logits": tu.mask_for_memory(mask_logits, self._mask_size),
            "object_score_logits": tu.feed_like(sig.input("object_score_logits"), object_score),
            "is_mask_from_points": tu.feed_like(sig.input("is_mask_from_points"),
                                                bool(is_mask_from_points)),
        })
        return mem.MemoryFrame(out["memory_feat"][0].astype(np.float32), self._maskmem_pos)

    @override
    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[mem.MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        self.require(Capability.MEMORY)
        rows, ptrs, offs = mem.check_memory_args(memories, memory_rows, pointers,
                                                 pointer_offsets, self.memory_settings,
                                                 self._channels)
        norm = max(1, (self.memory_settings.max_obj_ptrs or 16) - 1)
        out = self.memory_attention.run(["conditioned_feat"], {
            "trk_feat_2": embedding.features["trk_feat_2"],
            "memory_feats": np.stack([m.features for m in memories]).astype(np.float32),
            "memory_rows": rows, "pointers": ptrs, "pointer_tpos": offs / np.float32(norm),
        })
        return mem.conditioned(embedding, out["conditioned_feat"].astype(np.float32))

    @override
    def close(self) -> None:
        tu.close_all(self.encoder, self.decoder, self.language, self.detector,
                     self.memory_encoder, self.memory_attention)
