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
The adapter is the image encoder; the decoder, the concept detector and the memory graphs are
role objects it composes (:mod:`._nso_roles`), the last two only when their graphs are present.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
from typing_extensions import override

from ..base import Embedding, SamAdapter
from ..errors import BundleFileError, LayoutMismatchError, ModelFileMissingError
from ..files import read_json, read_npz
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from ..values import Capability
from ..workflow_precision import Bf16Grants, WorkflowPlan, WorkflowPlanError, read_bf16, read_plan
from . import _assumptions as asm
from . import _memory as mem
from . import _tracker_util as tu
from ._common import encode_image, fixed_dim, spatial_size
from ._concepts import slot_count
from ._nso_roles import DET, NsoDetector, NsoMemory, NsoPromptDecoder
from ._padding import decide_padding

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


def _find(graphs: Mapping[str, GraphSignature], role: str) -> GraphSignature | None:
    ins, outs = ROLES[role]
    for name in sorted(graphs):
        g = graphs[name]
        if set(ins) <= g.input_names and set(outs) <= g.output_names:
            return g
    return None


def _plan(folder: Path) -> WorkflowPlan | None:
    """The bundle's per-workflow graphs (None: one precision for all)."""
    try:
        plan = read_plan(folder)
    except WorkflowPlanError as exc:
        raise BundleFileError(folder / "manifest.json", str(exc)) from exc
    return plan if plan is not None and "image_encoder" in plan.default else None


class NsoAdapter(SamAdapter):
    """Clicks, boxes, text, exemplars and memory with the ``nso-sam3`` bundle."""

    layout = "nso-sam3"
    #: bf16 is chosen per workflow here (:class:`Bf16Grants`), not for the whole bundle.
    routes_bf16 = True

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: the two-neck encoder and the 4-token prompt decoder."""
        roles = {r: _find(graphs, r) for r in ROLES}
        if roles["encoder"] is None or roles["decoder"] is None:
            return None
        return {r: g for r, g in roles.items() if g is not None}

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc, dec = graphs["encoder"], graphs["decoder"]
        self.plan = _plan(enc.path.parent)
        folder = enc.path.parent
        #: On "OpenVINO CPU bf16": which workflows compute in bf16 (None on other devices).
        self.bf16: Bf16Grants | None = None if config.openvino != "bf16" else read_bf16(
            folder, config.bf16_everywhere)
        # the graphs bf16 does not route (and the workflows it does not grant) run OpenVINO's f32
        bf16_config, exact = config, config.exact()
        # a per-workflow bundle: the default (fp32) encoder is the manifest's, not the file
        # that sorts first; the others run for the workflows the manifest grants them
        enc_path = folder / self.plan.default["image_encoder"] if self.plan else enc.path
        self._default_file = enc_path.name
        names = self.plan.files("image_encoder") if self.plan else [enc_path.name]
        #: (encoder file, bf16?) -> its session (compiled on first use only)
        self._sessions = {(n, False): LazySession(folder / n, exact) for n in names}
        if self.bf16 is not None:
            self._sessions.update({(n, True): LazySession(folder / n, bf16_config)
                                   for n in names})
        self.encoder = self._sessions[(enc_path.name, self._bf16(None))]
        self._encoders: dict[str, LazySession] = {n: self._sessions[(n, False)]
                                                  for n in names[1:]}
        config = exact
        # The decoder runs many times on same-shaped feeds: onnxruntime's CPU arena reuses its
        # buffers (without it a batch of 16 clicks cost 3x more per click, fresh pages every
        # call); the encoder keeps the config's choice (its arena raised the peak, not the speed).
        self.decoder = LazySession(dec.path, replace(config, cpu_mem_arena=True))
        self._input = enc.input("pixel_values")
        self._mask_size = spatial_size(dec.input("mask_input"), self.layout, dec.path.name)
        self._channels = fixed_dim(dec.input("image_embed"), 1, self.layout, dec.path.name)
        #: Does the decoder append SAM's padding point itself? (this project's export does)
        self.padding = decide_padding(dec, "point_coords", "point_labels", True)
        self.language: LazySession | None = None
        self.detector: LazySession | None = None
        self.memory_encoder: LazySession | None = None
        self.memory_attention: LazySession | None = None
        has_att, has_enc = "memory_attention" in graphs, "memory_encoder" in graphs
        if has_att != has_enc:
            present = graphs["memory_attention" if has_att else "memory_encoder"].path
            raise ModelFileMissingError(
                present.parent, f"{present.name} is here but not the other memory graph; "
                "propagation needs both memory_encoder and memory_attention.")
        self._load_constants(enc.path.parent)
        self._attach_prompt_decoder(NsoPromptDecoder(
            self.decoder, self._mask_size, np.dtype(dec.input("point_labels").dtype),
            self.padding, self._no_mem,
            # bundles exported before the batch axis was dynamic take one object per call
            batched=dec.input("point_coords").shape[0] != 1))  # clicks, boxes
        if "language" in graphs and "detector" in graphs:
            self.language = LazySession(graphs["language"].path, config)
            self.detector = LazySession(graphs["detector"].path, config)
            slots = slot_count(graphs["detector"].input("exemplar_boxes"), 0)
            self._attach_detector(NsoDetector(self.language, self.detector, slots,
                                              self._mask_size, self.layout),
                                  exemplars=True)  # text, exemplars
        if has_att:
            self.memory_encoder = LazySession(graphs["memory_encoder"].path, config)
            att = graphs["memory_attention"].path
            if self.plan is not None and (name := self.plan.file_for(
                    Capability.MEMORY, "memory_attention")):
                att = folder / name  # memory attention serves propagation alone
            self.memory_attention = LazySession(  # bf16 where propagation's verdict passed
                att, bf16_config if self._bf16(Capability.MEMORY) else config)
            self._attach_memory(NsoMemory(self.memory_encoder, self.memory_attention,
                                          self._settings, self._maskmem_pos, self._mask_size,
                                          self._channels))  # memory
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
        self._settings = mem.settings_from(consts)
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
    def encode_for(self, rgb: np.ndarray, need: Capability) -> Embedding:
        """Encode with the encoder the manifest grants ``need``'s workflow (default: fp32).

        On "OpenVINO CPU bf16" it computes in bf16 where the bundle's bf16 verdict for that
        workflow passed (:class:`Bf16Grants`), in OpenVINO's f32 otherwise.
        """
        session = self._sessions[(self._file(need), self._bf16(need))]
        return encode_image(session, self._input, self.layout, rgb, self._encoder_outputs)

    def _file(self, need: Capability | None) -> str:
        """The image-encoder file ``need``'s workflow runs."""
        chosen = None if self.plan is None else self.plan.file_for(need)
        return chosen or self._default_file

    def _bf16(self, need: Capability | None) -> bool:
        """Whether ``need``'s workflow computes in bf16 (only on "OpenVINO CPU bf16")."""
        return self.bf16 is not None and self.bf16.runs_bf16(need)

    @override
    def encoder_variant(self, need: Capability | None) -> str | None:
        """The encoder file when it is not the default one, ``"<file>@bf16"`` in bf16."""
        name = self._file(need)
        if self._bf16(need):
            return f"{name}@bf16"
        return None if name == self._default_file else name

    def store_arithmetic(self) -> str | None:
        """``"bf16"`` if a request without a workflow (an embedding store's) runs bf16."""
        return "bf16" if self._bf16(None) else None

    @override
    def close(self) -> None:
        tu.close_all(self.decoder, self.language, self.detector, self.memory_encoder,
                     self.memory_attention, *self._sessions.values())
