"""Adapter for the ``jax-image-tools`` video export (``sam3-video-onnx`` and its siblings).

Contract (docs/layouts.md#jax-video). No exporter code is public:
the names below are those seen in three programs that run the EdgeTAM sibling, so graphs are
matched loosely and then checked name by name, with a :class:`LayoutMismatchError` that lists what
differs.

* ``vision_encoder``: ``pixel_values [1,3,S,S]`` float, normalised with ``image_mean`` /
  ``image_std`` from ``constants.json`` -> ``feats0``, ``feats1`` (tracker high-res levels),
  ``feats2`` (raw top level ``F``), position encodings incl. ``pos2 [1,C,g,g]``;
* ``mask_decoder``: ``feats0..2``, ``input_points [1,1,N,2]`` (model-input pixels),
  ``input_labels [1,1,N]`` int32 -> ``pred_masks [1,1,3,L,L]``, ``high_res_masks``,
  ``iou_scores [1,1,3]``, ``object_pointer [1,1,C]``, ``object_score_logits``; multimask only
  (a graph with one candidate is used as the single-mask decoder for > 1 point); an unprompted
  slice gets one point (0, 0) with label -1;
* ``memory_encoder``: ``vision_features`` (raw ``F``), ``pred_masks_high_res [1,1,S,S]``,
  ``is_mask_from_pts [1]`` (+ ``object_score_logits`` if the graph declares it) ->
  ``memory_tokens``, ``memory_pos_enc`` ``[T,1,C_m]``;
* ``memory_attention``: ``current_vision_features``/``current_vision_position_embeddings``
  ``[T,1,C]``, ``spatial_memory``/``spatial_memory_position_embeddings [T k,1,C_m]``,
  ``pointer_memory``/``pointer_memory_position_embeddings [tp P,1,C_m]`` (dynamic k, P; a C-d
  pointer is ``tp = C / C_m`` tokens) -> ``conditioned_features [1,1,T,C]``;
* ``constants.json``: ``image_mean``, ``image_std``, ``memory_temporal_positional_encoding``
  ``[num_maskmem][C_m]`` (added here to each memory's position encoding by its temporal row).

Without the two memory graphs the bundle answers clicks and boxes; :attr:`Capability.MEMORY` is
then absent. Two SAM 3 constants have no known home in this export: ``no_mem_embed`` (see
:data:`NO_MEM_EMBED_KEYS`) and the pointers' temporal projection, taken from ``constants.json`` or
a ``pointer_tpos.onnx`` graph when the bundle has either (:mod:`._pointer_pos`), else zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from typing_extensions import override

from ..base import Capability, Embedding, MaskCandidates, SamAdapter
from ..errors import LayoutMismatchError, ModelFileMissingError
from ..files import read_json
from ..graph_info import GraphSignature
from ..imageops import resize_rgb_uint8
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from . import _memory as mem
from . import _tracker_util as tu
from ._common import as_float32, fixed_dim, spatial_size
from ._jax_memory import MEMENC_OUTPUTS, JaxMemory
from ._padding import PaddingDecision, decide_padding, with_padding
from ._pointer_pos import PointerEncoding, find_pointer_encoding

FEATS = ("feats0", "feats1", "feats2")
DECODER_INPUTS = (*FEATS, "input_points", "input_labels")
DECODER_OUTPUTS = ("pred_masks", "high_res_masks", "iou_scores", "object_pointer",
                   "object_score_logits")
MEMENC_INPUTS = ("vision_features", "pred_masks_high_res", "is_mask_from_pts")
ATTENTION_INPUTS = ("current_vision_features", "current_vision_position_embeddings",
                    "spatial_memory", "spatial_memory_position_embeddings", "pointer_memory",
                    "pointer_memory_position_embeddings")
TPOS_KEY = "memory_temporal_positional_encoding"

#: ASSUMPTION (the single switch for SAM 3's ``no_mem_embed``). The export's consumers feed the
#: decoder "feats2 + no-memory embedding" on a prompted slice, so the graphs do not add it; where
#: the SAM 3 export keeps the vector is unknown (the consumers of the EdgeTAM sibling hard-code it
#: or read a file they extracted themselves; one adds nothing). It is read from ``constants.json``
#: under the first of these keys present and added exactly once to the raw ``feats2`` of a
#: prompted slice; if none is present nothing is added (:attr:`JaxVideoAdapter.no_mem_embed` is
#: then None). Set ``JaxVideoAdapter.no_mem_embed_keys = ()`` to never add it.
NO_MEM_EMBED_KEYS = ("no_mem_embed", "no_memory_embedding")


def _loose_decoder(g: GraphSignature) -> bool:
    return ({"input_points", "input_labels"} <= g.input_names
            and any(n.startswith("feats") for n in g.input_names)
            and any("pointer" in n for n in g.output_names)
            and any("high_res" in n for n in g.output_names))


@dataclass
class JaxPromptDecoder:
    """The multimask (and optional single-mask) decoder, as a :class:`~..roles.PromptDecoder`.

    Attributes
    ----------
    decoders : dict
        ``decoder_multi`` and/or ``decoder_single``.
    padding : dict
        Per decoder file: does the graph append SAM's padding point itself?
    no_mem : numpy.ndarray or None
        ``(1, C, 1, 1)`` float32 added once to a prompted slice's raw ``feats2`` (None: nothing
        added; see :data:`NO_MEM_EMBED_KEYS`).
    mask_size : tuple of int
        ``(L, L)`` of ``pred_masks``.
    label_dtype : numpy.dtype
        Declared dtype of ``input_labels``.
    accepts_mask_input : bool
        Never: the graphs take no mask prompt.
    """

    decoders: Mapping[str, LazySession]
    padding: dict[str, PaddingDecision]
    no_mem: np.ndarray | None
    mask_size: tuple[int, int]
    label_dtype: np.dtype
    accepts_mask_input: bool = False

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """Decode ``(N, 2)`` model-input ``(x, y)`` points; no points is SAM's empty prompt."""
        if mask_input is not None:
            raise ValueError("the jax-video decoder takes no mask_input")
        pts, labs = tu.order_prompt(points_xy, labels)
        dec = tu.pick_decoder(len(labs), self.decoders.get("decoder_multi"),
                              self.decoders.get("decoder_single"))
        if len(labs) == 0:  # SAM's empty prompt, as the consumers send it
            pts, labs = np.zeros((1, 2), np.float32), np.full(1, -1, np.int64)
        pts, labs = with_padding(pts, labs, self.padding[dec.path.name])
        feats = embedding.features
        top = feats.get(mem.CONDITIONED)
        if top is None:  # prompted slice: raw feats2 (+ no_mem_embed once, see the switch)
            top = feats["feats2"] + (0.0 if self.no_mem is None else self.no_mem)
        names = ["pred_masks", "iou_scores", "object_pointer", "object_score_logits"]
        out = dec.run(names, {
            "feats0": feats["feats0"], "feats1": feats["feats1"],
            "feats2": np.asarray(top, np.float32), "input_points": pts[None, None],
            "input_labels": labs[None, None].astype(self.label_dtype),
        })
        return MaskCandidates(
            logits=out["pred_masks"].reshape(-1, *self.mask_size).astype(np.float32),
            iou=out["iou_scores"].reshape(-1).astype(np.float32),
            object_score=float(out["object_score_logits"].reshape(-1)[0]),
            single_mask_first=False,
            extras={"object_pointer": out["object_pointer"].reshape(-1).astype(np.float32)},
        )


def _memory_channels(encoder: LazySession, attention: LazySession) -> int:
    """``C_m`` as the memory encoder (else memory attention) declares it; SAM 3's 64."""
    for info in (encoder.signature.output("memory_tokens"),
                 attention.signature.input("pointer_memory")):
        dim = info.shape[-1]
        if isinstance(dim, int) and dim > 0:
            return dim
    return 64


class JaxVideoAdapter(SamAdapter):
    """Clicks, boxes and video memory with the jax-image-tools four-graph export."""

    layout = "jax-video"
    no_mem_embed_keys: tuple[str, ...] = NO_MEM_EMBED_KEYS

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Assign the graphs by loose name rules (exact names are checked on opening)."""
        sigs = sorted(graphs.values(), key=lambda g: g.path.name)
        decoders = [g for g in sigs if _loose_decoder(g)]
        encoder = next((g for g in sigs if "pixel_values" in g.input_names
                        and any(n.startswith("feats") for n in g.output_names)), None)
        if not decoders or encoder is None:
            return None
        roles = {"encoder": encoder}
        for g in decoders:
            single = tu.candidate_count(g, "iou_scores", "pred_masks", axis=2) == 1
            roles.setdefault("decoder_single" if single else "decoder_multi", g)
        for role, test in (("memory_attention", lambda g: "spatial_memory" in g.input_names),
                           ("memory_encoder", lambda g: "memory_tokens" in g.output_names
                            or "is_mask_from_pts" in g.input_names)):
            found = next((g for g in sigs if test(g)), None)
            if found is not None:
                roles[role] = found
        return roles

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc = graphs["encoder"]
        has_memory = "memory_attention" in graphs or "memory_encoder" in graphs
        tu.check_names(enc, self.layout, ["pixel_values"],
                       [*FEATS, *(["pos2"] if has_memory else [])])
        self.encoder = LazySession(enc.path, config)
        self._input = enc.input("pixel_values")
        self.decoders = {}
        for role in ("decoder_multi", "decoder_single"):
            if role in graphs:
                tu.check_names(graphs[role], self.layout, DECODER_INPUTS, DECODER_OUTPUTS)
                self.decoders[role] = LazySession(graphs[role].path, config)
        #: Per decoder file: does the graph append SAM's padding point itself?
        self.padding: dict[str, PaddingDecision] = {
            s.path.name: decide_padding(s.signature, "input_points", "input_labels", True)
            for s in self.decoders.values()}
        first = next(iter(self.decoders.values())).signature
        self._mask_size = spatial_size(first.output("pred_masks"), self.layout, first.path.name)
        self._channels = fixed_dim(first.input("feats2"), 1, self.layout, first.path.name)
        self._grid = spatial_size(first.input("feats2"), self.layout, first.path.name)
        self._label_dtype = np.dtype(first.input("input_labels").dtype)
        folder = enc.path.parent
        if has_memory:
            for role, other in (("memory_attention", "memory_encoder"),
                                ("memory_encoder", "memory_attention")):
                if role in graphs and other not in graphs:
                    raise ModelFileMissingError(
                        folder / f"{other}.onnx", f"{graphs[role].path.name} is here but no graph "
                        f"with the {other} inputs/outputs; propagation needs both.")
            tu.check_names(graphs["memory_attention"], self.layout, ATTENTION_INPUTS,
                           ["conditioned_features"])
            tu.check_names(graphs["memory_encoder"], self.layout, MEMENC_INPUTS, MEMENC_OUTPUTS,
                           optional=["object_score_logits"])
        self.memory_attention = (LazySession(graphs["memory_attention"].path, config)
                                 if has_memory else None)
        self.memory_encoder = (LazySession(graphs["memory_encoder"].path, config)
                               if has_memory else None)
        self._config = config
        self.pointer_encoding: PointerEncoding | None = None
        self._pos2: np.ndarray | None = None
        self._load_constants(folder / "constants.json", has_memory)  # attaches the memory
        self._attach_prompt_decoder(JaxPromptDecoder(
            self.decoders, self.padding, self.no_mem_embed, self._mask_size,
            self._label_dtype))  # clicks, boxes

    def _load_constants(self, path: Path, has_memory: bool) -> None:
        if not path.is_file():
            raise ModelFileMissingError(path, "The jax-video bundle keeps its image normalisation "
                                        "(image_mean, image_std) and memory tables there.")
        consts = read_json(path)
        need = ["image_mean", "image_std", *([TPOS_KEY] if has_memory else [])]
        if missing := [k for k in need if k not in consts]:
            raise LayoutMismatchError(self.layout, path.name, f"missing keys {missing}; "
                                      f"it has {sorted(consts)}")
        mean, std = (np.asarray(consts[k], np.float32).reshape(-1) for k in need[:2])
        if mean.max() > 1.0:  # given on the 0-255 scale
            mean, std = mean / 255.0, std / 255.0
        self.image_mean, self.image_std = mean, std
        key = next((k for k in self.no_mem_embed_keys if k in consts), None)
        self.no_mem_embed = (None if key is None else
                             np.asarray(consts[key], np.float32).reshape(1, -1, 1, 1))
        if self.no_mem_embed is not None and self.no_mem_embed.shape[1] != self._channels:
            raise LayoutMismatchError(self.layout, path.name, f"{key} has "
                                      f"{self.no_mem_embed.shape[1]} values, feats2 "
                                      f"{self._channels} channels")
        encoder, attention = self.memory_encoder, self.memory_attention
        if has_memory and encoder is not None and attention is not None:
            self._tpos = np.asarray(consts[TPOS_KEY], np.float32)
            settings = mem.settings_from(
                {"num_maskmem": len(self._tpos), **consts})
            men = encoder.signature
            self.pointer_encoding = find_pointer_encoding(
                consts, path.parent, path.name, _memory_channels(encoder, attention),
                self._channels, self._config, self.layout)
            self._attach_memory(JaxMemory(
                encoder=encoder, attention=attention, layout=self.layout,
                memory_settings=settings, tpos=self._tpos,
                mask_size=spatial_size(men.input("pred_masks_high_res"), self.layout,
                                       men.path.name),
                channels=self._channels, grid=self._grid,
                pointer_encoding=self.pointer_encoding, position=self._vision_position,
            ))

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        out = {
            "padding": asm.padding(self.padding),
            "normalisation": (f"x / 255, (x - {[round(float(v), 4) for v in self.image_mean]})"
                              f" / {[round(float(v), 4) for v in self.image_std]}",
                              "constants.json image_mean/std"),
            "no-memory embedding": (
                ("added to feats2 on prompted slices", f"constants.json "
                 f"{next(k for k in self.no_mem_embed_keys if self.no_mem_embed is not None)}")
                if self.no_mem_embed is not None else
                ("none added", f"constants.json has none of {list(self.no_mem_embed_keys)}")),
            "mask kind": ("logits (pred_masks, multimask; a 1-candidate graph is the "
                          "single-mask decoder)", "decoder outputs"),
            "empty prompt": ("one point (0, 0) label -1", "EdgeTAM-sibling consumers"),
        }
        if self.pointer_encoding is not None:
            pe = self.pointer_encoding
            value = ("zeros" if pe.is_zeros else
                     "sine(offset / (max_ptrs - 1)) projected, repeated per token")
            out["pointer encoding"] = (value, pe.source)
            out["memory temporal rows"] = (f"{len(self._tpos)} rows added to memory pos enc",
                                           f"constants.json {TPOS_KEY}")
        return out

    # ---- geometry -----------------------------------------------------------------------
    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._input, self.layout, self.encoder.path.name)

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        return self._mask_size

    # ---- image path ---------------------------------------------------------------------
    def _feed(self, rgb: np.ndarray) -> np.ndarray:
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"expected an (rows, cols, 3) uint8 RGB image, got {rgb.shape} "
                             f"{rgb.dtype}")
        x = resize_rgb_uint8(rgb, self.input_size).astype(np.float32) / 255.0
        x = (x - self.image_mean) / self.image_std
        dtype = np.float16 if self._input.dtype == "float16" else np.float32
        return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=dtype)

    @override
    def encode(self, rgb: np.ndarray) -> Embedding:
        names = [*FEATS, *(["pos2"] if self.has(Capability.MEMORY) and self._pos2 is None
                           else [])]
        out = as_float32(self.encoder.run(names, {"pixel_values": self._feed(rgb)}))
        if "pos2" in out:  # image-independent: kept once, not per embedding
            self._pos2 = out.pop("pos2")
        return Embedding(out, self.input_size, (int(rgb.shape[0]), int(rgb.shape[1])))

    def _vision_position(self) -> np.ndarray:
        """``pos2``, the top-level feature's position encoding (one blank encode if needed)."""
        if self._pos2 is None:  # constant; computed once from a blank image
            self.encode(np.zeros((*self.input_size, 3), np.uint8))
        if self._pos2 is None:  # encode() keeps it whenever the memory graphs are there
            raise LayoutMismatchError(self.layout, self.encoder.path.name, "no pos2 output")
        return self._pos2

    @override
    def close(self) -> None:
        tu.close_all(self.encoder, *self.decoders.values(), self.memory_attention,
                     self.memory_encoder, self.pointer_encoding)
