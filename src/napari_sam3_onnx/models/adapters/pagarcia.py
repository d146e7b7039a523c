"""Adapter for the ``pagarcia/sam3-onnx-cpp`` tracker bundle (SAM 3 with video memory graphs).

Contract (docs/layouts.md#pagarcia-tracker). Graphs are assigned to roles
by their input/output names only:

* encoder (the onnx-community vision encoder): ``pixel_values [1,3,S,S]`` float (mean = std = 0.5)
  -> ``image_embeddings.0/.1/.2``; ``.2`` is the **raw** top-level feature ``F``;
* decoders ``image_decoder_*``: ``point_coords [1,N,2]`` (model-input pixels),
  ``point_labels [1,N]`` int32, ``image_embed`` (``F + no_mem_embed`` on a prompted slice, or the
  memory-attention output), ``high_res_feats_0/1`` (+ ``mask_inputs [1,1,L,L]`` for the
  ``image_decoder_mask_*`` variants) -> ``obj_ptr``, ``pred_mask``, ``object_score_logits``,
  ``iou_scores [1,M]``, ``pred_multimasks [1,M,L,L]``; M = 3 (multimask) or 1 (single-mask);
  best-IoU choice and occlusion gating are in-graph (older exports lack the last two outputs:
  one candidate, IoU NaN);
* ``memory_encoder_*``: ``pred_mask_high_res [1,1,S,S]`` logits, ``current_vision_feat`` (raw
  ``F``), ``object_score_logits [1,1]``, ``is_mask_from_points [1]`` -> ``maskmem_features``,
  ``maskmem_pos_enc`` ``[1,C_m,g,g]``;
* ``memory_attention_*``: ``current_vision_feat``, ``current_vision_pos_embed [g*g,1,C]``,
  ``memory_obj_ptrs [P,C]``, ``memory_obj_tpos [P]`` (raw slice distances; the graph normalises),
  ``memory_mask_feats``/``memory_mask_pos [M,C_m,g,g]``, ``memory_mask_tpos_idx [M]`` int64 ->
  ``fused_feat [1,C,g,g]``;
* ``video_constants_*.npz`` beside them: ``no_mem_embed_bchw [1,C,1,1]``,
  ``current_vision_pos_embed`` and the bank settings (found by the exporter's file naming: an
  ``.npz`` has no signature to recognise).

``no_mem_embed`` is added here, once, when a prompted slice is decoded (docs/layouts.md#pitfalls);
the embedding keeps the raw feature, which is also what the memory graphs get. Without the memory
graphs the bundle still answers clicks and boxes; :attr:`Capability.MEMORY` is then absent. Shipped
memory-attention variants have static memory sizes: unused rows are zero-filled, as the exporter's
own runtime does (docs/layouts.md#pagarcia-tracker).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from typing_extensions import override

from ..base import Embedding, MaskCandidates, SamAdapter
from ..errors import LayoutMismatchError, ModelFileMissingError
from ..files import read_npz
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from . import _memory as mem
from . import _tracker_util as tu
from ._common import encode_image, fixed_dim, require_names, spatial_size
from ._padding import PaddingDecision, decide_padding, with_padding
from ._pagarcia_memory import MEMENC_OUTPUTS, PagarciaMemory

EMBEDDINGS = ("image_embeddings.0", "image_embeddings.1", "image_embeddings.2")
DECODER_INPUTS = ("point_coords", "point_labels", "image_embed", "high_res_feats_0",
                  "high_res_feats_1")
DECODER_OUTPUTS = ("obj_ptr", "pred_mask", "object_score_logits")
ATTENTION_INPUTS = ("current_vision_feat", "current_vision_pos_embed", "memory_obj_ptrs",
                    "memory_obj_tpos", "memory_mask_feats", "memory_mask_pos",
                    "memory_mask_tpos_idx")
MEMENC_INPUTS = ("pred_mask_high_res", "current_vision_feat", "object_score_logits",
                 "is_mask_from_points")
#: Decoder roles and the exporter's file-name base of each (used only to pair variants).
DECODER_BASES = {"decoder_multi": "image_decoder", "decoder_single": "image_decoder_singlemask",
                 "decoder_mask_multi": "image_decoder_mask",
                 "decoder_mask_single": "image_decoder_mask_singlemask"}


def _attention_rank(sig: GraphSignature) -> tuple[int, int, str]:
    """Sort key: dynamic memory first, then the largest static memory, then the name."""
    dim = sig.input("memory_mask_feats").shape[0]
    return (1, -dim, sig.path.name) if isinstance(dim, int) else (0, 0, sig.path.name)


@dataclass
class PagarciaPromptDecoder:
    """The tracker's decoder variants, as a :class:`~..roles.PromptDecoder`.

    Attributes
    ----------
    decoders : dict
        ``decoder_multi``, ``decoder_single`` and the ``decoder_mask_*`` variants present.
    padding : dict
        Per decoder file: does the graph append SAM's padding point itself?
    no_mem : numpy.ndarray
        ``(1, C, 1, 1)`` float32 ``no_mem_embed``, added once to a prompted slice's raw feature.
    mask_size : tuple of int
        ``(L, L)`` of ``pred_mask`` (and of a mask prompt).
    label_dtype : numpy.dtype
        Declared dtype of ``point_labels``.
    """

    decoders: Mapping[str, LazySession]
    padding: dict[str, PaddingDecision]
    no_mem: np.ndarray
    mask_size: tuple[int, int]
    label_dtype: np.dtype

    @property
    def accepts_mask_input(self) -> bool:
        """Whether an ``image_decoder_mask_*`` variant (``mask_inputs``) is in the bundle."""
        return any(r.startswith("decoder_mask") for r in self.decoders)

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """Decode ``(N, 2)`` model-input ``(x, y)`` points; SAM picks multi/single by count."""
        pts, labs = tu.order_prompt(points_xy, labels)
        feats = embedding.features
        top = feats.get(mem.CONDITIONED)
        if top is None:  # a prompted slice: raw feature + no_mem_embed, added exactly once
            top = feats[EMBEDDINGS[2]] + self.no_mem
        prefix = "decoder"
        if mask_input is not None:
            if not self.accepts_mask_input:
                raise ValueError("this bundle has no image_decoder_mask_* graph for mask_input")
            prefix = "decoder_mask"
        dec = tu.pick_decoder(len(labs), self.decoders.get(f"{prefix}_multi"),
                              self.decoders.get(f"{prefix}_single"))
        pts, labs = with_padding(pts, labs, self.padding[dec.path.name])
        outs = dec.signature.output_names
        multi = {"iou_scores", "pred_multimasks"} <= outs
        names = ["obj_ptr", "object_score_logits",
                 *(["iou_scores", "pred_multimasks"] if multi else ["pred_mask"])]
        feeds = {
            "point_coords": pts[None], "point_labels": labs[None].astype(self.label_dtype),
            "image_embed": top.astype(np.float32), "high_res_feats_0": feats[EMBEDDINGS[0]],
            "high_res_feats_1": feats[EMBEDDINGS[1]],
        }
        if mask_input is not None:
            feeds["mask_inputs"] = np.asarray(mask_input, np.float32).reshape(
                1, 1, *self.mask_size)
        out = dec.run(names, feeds)
        logits = out["pred_multimasks" if multi else "pred_mask"].reshape(-1, *self.mask_size)
        iou = out["iou_scores"].reshape(-1) if multi else np.full(len(logits), np.nan)
        return MaskCandidates(
            logits=logits.astype(np.float32), iou=iou.astype(np.float32),
            object_score=float(out["object_score_logits"].reshape(-1)[0]),
            single_mask_first=False,
            extras={"object_pointer": out["obj_ptr"].reshape(-1).astype(np.float32)},
        )


class PagarciaTrackerAdapter(SamAdapter):
    """Clicks, boxes and video memory: pagarcia's tracker graphs + the onnx-community encoder."""

    layout = "pagarcia-tracker"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Assign encoder, decoder variants and memory graphs (None: not this layout)."""
        sigs = list(graphs.values())
        encoders = [g for g in sigs if "pixel_values" in g.input_names
                    and set(EMBEDDINGS) <= g.output_names]
        decoders = [g for g in sigs if set(DECODER_INPUTS) <= g.input_names
                    and set(DECODER_OUTPUTS) <= g.output_names]
        if not encoders or not decoders:
            return None
        attention = sorted((g for g in sigs if set(ATTENTION_INPUTS) <= g.input_names),
                           key=_attention_rank)
        token = tu.variant_token(attention[0].path.stem, "memory_attention") if attention else None
        roles = {"encoder": sorted(encoders, key=lambda g: g.path.name)[0]}
        if attention:
            roles["memory_attention"] = attention[0]
        encs = [g for g in sigs if {"is_mask_from_points", "pred_mask_high_res"} <= g.input_names]
        if encs:
            roles["memory_encoder"] = tu.prefer_variant(encs, "memory_encoder", token)
        for role, base in DECODER_BASES.items():
            single = role.endswith("single")
            group = [g for g in decoders
                     if ("mask_inputs" in g.input_names) == ("_mask_" in role)
                     and (tu.candidate_count(g, "iou_scores", "pred_multimasks") == 1) == single]
            if group:
                roles[role] = tu.prefer_variant(group, base, token)
        return roles

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc = graphs["encoder"]
        require_names(enc, self.layout, ["pixel_values"], EMBEDDINGS)
        self.encoder = LazySession(enc.path, config)
        self._input = enc.input("pixel_values")
        self.decoders = {r: LazySession(graphs[r].path, config) for r in DECODER_BASES
                         if r in graphs}
        #: Per decoder file: does the graph append SAM's padding point itself?
        self.padding: dict[str, PaddingDecision] = {
            s.path.name: decide_padding(s.signature, "point_coords", "point_labels", True)
            for s in self.decoders.values()}
        first = next(iter(self.decoders.values())).signature
        self._mask_size = spatial_size(first.output("pred_mask"), self.layout, first.path.name)
        self._label_dtype = np.dtype(first.input("point_labels").dtype)
        self._channels = fixed_dim(first.input("image_embed"), 1, self.layout, first.path.name)
        has_att, has_enc = "memory_attention" in graphs, "memory_encoder" in graphs
        if has_att != has_enc:
            role, other = (("memory_attention", "memory_encoder") if has_att
                           else ("memory_encoder", "memory_attention"))
            present = graphs[role].path
            suffix = tu.variant_token(present.stem, role) or ""
            raise ModelFileMissingError(
                present.parent / f"{other}{suffix}.onnx",
                f"{present.name} is here but no graph with the {other} inputs/outputs; "
                "propagation needs both memory graphs of the same export.",
            )
        self.memory_attention: LazySession | None = None
        self.memory_encoder: LazySession | None = None
        role0 = next(iter(self.decoders))  # the export variant, to pick its constants file
        token = tu.variant_token(graphs[role0].path.stem, DECODER_BASES[role0])
        if has_att:
            att, men = graphs["memory_attention"], graphs["memory_encoder"]
            require_names(att, self.layout, ATTENTION_INPUTS, ["fused_feat"])
            require_names(men, self.layout, MEMENC_INPUTS, MEMENC_OUTPUTS)
            self.memory_attention = LazySession(att.path, config)
            self.memory_encoder = LazySession(men.path, config)
            token = tu.variant_token(att.path.stem, "memory_attention")
        self._load_constants(first.path.parent, token)  # attaches the memory graphs, if any
        self._attach_prompt_decoder(PagarciaPromptDecoder(
            self.decoders, self.padding, self._no_mem, self._mask_size,
            self._label_dtype))  # clicks, boxes

    def _load_constants(self, folder: Path, token: str | None) -> None:
        found = sorted(folder.glob("video_constants*.npz"))
        wanted = folder / f"video_constants{token or ''}.npz"
        path = wanted if wanted in found else (found[0] if found else None)
        if path is None:
            raise ModelFileMissingError(
                wanted, "The pagarcia tracker bundle keeps no_mem_embed (needed for every click) "
                "and the memory settings there; put the exporter's video_constants .npz beside "
                "the graphs.",
            )
        consts = read_npz(path)
        if "no_mem_embed_bchw" not in consts:
            raise LayoutMismatchError(self.layout, path.name, "no 'no_mem_embed_bchw' array")
        self._no_mem = consts["no_mem_embed_bchw"].astype(np.float32).reshape(1, -1, 1, 1)
        if self._no_mem.shape[1] != self._channels:
            raise LayoutMismatchError(
                self.layout, path.name, f"no_mem_embed_bchw has {self._no_mem.shape[1]} "
                f"channels but the decoder's image_embed has {self._channels}",
            )
        self.constants_path = path
        encoder = self.memory_encoder  # set together with the attention (see __init__)
        if self.memory_attention is None or encoder is None:
            return
        att = self.memory_attention.signature
        cap = [att.input(n).shape[0] for n in ("memory_mask_feats", "memory_obj_ptrs")]
        settings = mem.settings_from(consts, **{
            k: (c if isinstance(c, int) else None)
            for k, c in zip(("max_memories", "max_pointers"), cap, strict=True)})
        self._grid = spatial_size(att.input("current_vision_feat"), self.layout, att.path.name)
        pos = consts.get("current_vision_pos_embed")
        n_tokens = self._grid[0] * self._grid[1]
        if pos is None or pos.size != n_tokens * self._channels:
            got = "absent" if pos is None else f"shape {pos.shape}"
            raise LayoutMismatchError(
                self.layout, path.name, f"current_vision_pos_embed is {got}; the memory "
                f"attention needs ({n_tokens}, 1, {self._channels})",
            )
        men = encoder.signature
        self._attach_memory(PagarciaMemory(
            encoder=encoder, attention=self.memory_attention, feature=EMBEDDINGS[2],
            memory_settings=settings,
            pos_embed=pos.astype(np.float32).reshape(n_tokens, 1, self._channels),
            pointer_dim=fixed_dim(att.input("memory_obj_ptrs"), 1, self.layout, att.path.name),
            mask_size=spatial_size(men.input("pred_mask_high_res"), self.layout, men.path.name),
        ))  # memory

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
        """``(1, C, 1, 1)`` float32 added to the raw feature on prompted slices (from the npz)."""
        return self._no_mem

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        out = {
            "padding": asm.padding(self.padding),
            "normalisation": asm.normalisation(self._input, self.encoder.path.name),
            "no-memory embedding": ("no_mem_embed added to image_embeddings.2 on prompted "
                                    "slices", "video_constants npz no_mem_embed_bchw"),
            "mask kind": ("logits (best-IoU selection and occlusion gating in the graph)",
                          "decoder outputs"),
        }
        if self.memory_attention is not None:
            out["pointer encoding"] = ("in the memory-attention graph (raw slice distances "
                                       "in memory_obj_tpos)", self.memory_attention.path.name)
        return out

    # ---- image path ---------------------------------------------------------------------
    @override
    def encode(self, rgb: np.ndarray) -> Embedding:
        return encode_image(self.encoder, self._input, self.layout, rgb, EMBEDDINGS)

    @override
    def close(self) -> None:
        tu.close_all(self.encoder, *self.decoders.values(), self.memory_attention,
                     self.memory_encoder)
