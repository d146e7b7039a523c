"""The tracker half of a composite folder: one encoder's ``image_embeddings.*`` feed SAM's head.

A dual encoder (wW-Ww's ``vision``, parodiniccolo's ``sam3_vision_dual``) emits the tracker
neck's ``image_embeddings.0/1/2`` besides the detector's levels. Two public graph sets consume
those tensors:

* the onnx-community ``prompt_encoder_mask_decoder`` (:class:`.hf_tracker.HfPromptDecoder`):
  clicks and boxes;
* the jax-image-tools ``mask_decoder`` + ``memory_encoder`` + ``memory_attention`` +
  ``constants.json`` (:mod:`.jax_video`): clicks, boxes and propagation. Their ``feats0``,
  ``feats1`` are the tracker neck's 4x and 2x maps (``image_embeddings.0/1``); their ``feats2``
  is the **raw** top level, while the Hugging Face encoder's ``image_embeddings.2`` already has
  ``no_mem_embed`` added (``Sam3TrackerModel.get_image_features``). So ``feats2 =
  image_embeddings.2 - no_mem_embed`` when ``constants.json`` carries that vector (the jax
  decoder adds it back on a prompted slice); without it ``image_embeddings.2`` is used as is and
  the assumption says so. The memory attention's position encoding is the encoder's top-level
  position encoding (SAM 3 computes one sine encoding for both necks).

Names, shapes and dtypes are checked against each other when the folder is opened; any
disagreement raises :class:`LayoutMismatchError` naming both tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import LayoutMismatchError, ModelFileMissingError
from ..files import read_json
from ..graph_info import GraphSignature, TensorInfo
from ..roles import MemoryGraphs, PromptDecoder
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from . import _memory as mem
from . import _tracker_util as tu
from ._common import fixed_dim, spatial_size
from ._jax_memory import JaxMemory
from ._levels import EncoderOutputs
from ._padding import decide_padding
from ._pointer_pos import find_pointer_encoding
from .hf_tracker import EMBEDDINGS, HfPromptDecoder
from .jax_video import (
    ATTENTION_INPUTS,
    DECODER_OUTPUTS,
    FEATS,
    MEMENC_INPUTS,
    NO_MEM_EMBED_KEYS,
    TPOS_KEY,
    JaxPromptDecoder,
)

JAX_DECODER_INPUTS = (*FEATS, "input_points", "input_labels")


def match_tracker(graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature]:
    """The tracker graphs of a folder whose encoder emits ``image_embeddings.*``."""
    out: dict[str, GraphSignature] = {}
    for name in sorted(graphs):
        g = graphs[name]
        if ({"input_points", "input_labels", "image_embeddings.2"} <= g.input_names
                and {"iou_scores", "pred_masks"} <= g.output_names):
            out.setdefault("tracker_decoder", g)
        elif set(JAX_DECODER_INPUTS) <= g.input_names and "object_pointer" in g.output_names:
            out.setdefault("mask_decoder", g)
        elif "spatial_memory" in g.input_names:
            out.setdefault("memory_attention", g)
        elif "memory_tokens" in g.output_names or "is_mask_from_pts" in g.input_names:
            out.setdefault("memory_encoder", g)
    return out


def _same(a: TensorInfo, b: TensorInfo, what: str, graph: str, layout: str) -> None:
    """``a`` (an encoder output) and ``b`` (a graph input) must agree in shape, both float.

    Float16 encoder outputs are cast to float32 (the engine's dtype), so only the kind is
    compared, not the width.
    """
    floats = a.dtype.startswith("float") and b.dtype.startswith("float")
    if tuple(a.shape[1:]) != tuple(b.shape[1:]) or not floats:
        raise LayoutMismatchError(layout, graph, (
            f"{what}: its input {b.name} {b.dtype}{list(b.shape)} does not fit the encoder's "
            f"{a.name} {a.dtype}{list(a.shape)}; these graphs do not belong together"))


@dataclass
class Tracker:
    """The prompt decoder (and memory) fed from a dual encoder.

    Attributes
    ----------
    decoder : PromptDecoder
        The SAM head.
    memory : MemoryGraphs or None
        Memory graphs (jax-image-tools pair) when the folder has them.
    encoder_outputs : tuple of str
        The encoder outputs the tracker needs per image.
    position : str or None
        The encoder's top-level position encoding (for memory attention).
    rename : dict
        Encoder output -> the name the tracker graphs take.
    no_mem : numpy.ndarray or None
        ``(1, C, 1, 1)`` subtracted from ``image_embeddings.2`` to get the raw feature.
    notes : dict
        Assumption entries.
    sessions : tuple
        To close.
    """

    decoder: PromptDecoder
    memory: MemoryGraphs | None
    encoder_outputs: tuple[str, ...]
    position: str | None
    rename: dict[str, str]
    no_mem: np.ndarray | None
    notes: dict[str, tuple[str, str]]
    sessions: tuple[tu.Closable | None, ...]

    def features(self, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The encoder's outputs under the tracker graphs' names."""
        for src, dst in self.rename.items():
            out[dst] = out.pop(src)
        if self.no_mem is not None and "feats2" in out:
            out["feats2"] = (out["feats2"] - self.no_mem).astype(np.float32)
        return out

    def assumptions(self) -> dict[str, tuple[str, str]]:
        """What the tracker half assumed."""
        return dict(self.notes)

    def close(self) -> None:
        """Release the tracker sessions."""
        tu.close_all(*self.sessions)


def open_tracker(graphs: Mapping[str, GraphSignature], enc: GraphSignature,
                 outputs: EncoderOutputs, config: RuntimeConfig, layout: str,
                 constant: Callable[[str], np.ndarray]) -> Tracker:
    """Open the tracker graphs of ``graphs`` on the dual encoder ``enc``."""
    if "mask_decoder" in graphs:
        return _jax_tracker(graphs, enc, outputs, config, layout, constant)
    dec = graphs["tracker_decoder"]
    for name in EMBEDDINGS:
        _same(enc.output(name), dec.input(name), "tracker decoder", dec.path.name, layout)
    session = LazySession(dec.path, config)
    size = spatial_size(dec.output("pred_masks"), layout, dec.path.name)
    notes = {
        "tracker": (f"{dec.path.name} on {enc.path.name}'s image_embeddings.* (one encode)",
                    "names, shapes, dtypes checked"),
        "padding": ("graph pads (boxes travel in input_boxes)", asm.CONTRACT),
        "no-memory embedding": ("inside image_embeddings.2 (Hugging Face adds it)",
                                asm.CONTRACT),
    }
    if "memory_attention" in graphs or "memory_encoder" in graphs:
        notes["memory"] = ("not used: propagation needs the jax-image-tools mask_decoder "
                           "(object pointers) next to the memory graphs", "folder")
    return Tracker(HfPromptDecoder(session, size), None, EMBEDDINGS, None, {}, None, notes,
                   (session,))


def _constants(folder: Path) -> dict:
    path = folder / "constants.json"
    if not path.is_file():
        raise ModelFileMissingError(path, "The jax-image-tools mask_decoder and memory graphs "
                                    "come with their constants.json (memory tables).")
    return read_json(path)


def _jax_tracker(graphs: Mapping[str, GraphSignature], enc: GraphSignature,
                 outputs: EncoderOutputs, config: RuntimeConfig, layout: str,
                 constant: Callable[[str], np.ndarray]) -> Tracker:
    dec = graphs["mask_decoder"]
    for src, dst in zip(EMBEDDINGS, FEATS, strict=True):
        _same(enc.output(src), dec.input(dst), "mask decoder", dec.path.name, layout)
    consts = _constants(enc.path.parent)
    key = next((k for k in NO_MEM_EMBED_KEYS if k in consts), None)
    top = enc.output(EMBEDDINGS[2])
    channels = fixed_dim(top, 1, layout, enc.path.name)
    grid = spatial_size(top, layout, enc.path.name)
    no_mem = None if key is None else np.asarray(consts[key], np.float32).reshape(1, -1, 1, 1)
    if no_mem is not None and no_mem.shape[1] != channels:
        raise LayoutMismatchError(layout, "constants.json", f"{key} has {no_mem.shape[1]} "
                                  f"values, image_embeddings.2 {channels} channels")
    session = LazySession(dec.path, config)
    padding = {dec.path.name: decide_padding(dec, "input_points", "input_labels", True)}
    size = spatial_size(dec.output("pred_masks"), layout, dec.path.name)
    missing = sorted(set(DECODER_OUTPUTS) - dec.output_names)
    if missing:
        raise LayoutMismatchError(layout, dec.path.name, f"missing outputs {missing}")
    decoder = JaxPromptDecoder({"decoder_multi": session}, padding, no_mem, size,
                               np.dtype(dec.input("input_labels").dtype))
    notes = {
        "tracker": (f"{dec.path.name} on {enc.path.name}'s image_embeddings.* as feats0..2 "
                    "(one encode)", "names, shapes, dtypes checked"),
        "padding": asm.padding(padding),
        "no-memory embedding": (
            (f"image_embeddings.2 - {key} = raw feats2; the decoder adds it on prompted slices",
             f"constants.json {key}") if key else
            ("image_embeddings.2 used as the raw feature (it includes no_mem_embed, which "
             "constants.json does not give)", asm.CONTRACT)),
        "normalisation of the tracker": ("the dual encoder's (constants.json image_mean/std "
                                         "belong to the jax vision encoder, not used)", "folder"),
    }
    sessions: list[tu.Closable | None] = [session]
    memory, position = None, None
    if "memory_attention" in graphs and "memory_encoder" in graphs:
        pos = _top_position(enc, outputs)
        if pos is None:  # wW-Ww's vision graph emits no position encoding
            notes["memory"] = (f"not used: memory attention needs the top-level position "
                               f"encoding, which {enc.path.name} does not emit",
                               f"{enc.path.name} outputs")
        else:
            memory = _jax_memory(graphs, enc, pos, consts, config, layout, constant, channels,
                                 grid)
            position = pos.name
            sessions += [memory.encoder, memory.attention, memory.pointer_encoding]
            notes["memory position encoding"] = (f"{position} (the detector neck's top-level "
                                                 "sine encoding)", f"{enc.path.name} shapes")
    elif "memory_attention" in graphs or "memory_encoder" in graphs:
        raise ModelFileMissingError(enc.path.parent / "memory_encoder.onnx",
                                    "propagation needs both memory graphs")
    return Tracker(decoder, memory, EMBEDDINGS, position, dict(zip(EMBEDDINGS, FEATS,
                   strict=True)), no_mem, notes, tuple(sessions))


def _top_position(enc: GraphSignature, outputs: EncoderOutputs) -> TensorInfo | None:
    """The encoder's position encoding of ``image_embeddings.2``'s shape (None: none)."""
    top = enc.output(EMBEDDINGS[2])
    return next((t for t in [*outputs.positions.values(), *enc.outputs]
                 if "pos" in t.name.lower() and tuple(t.shape[1:]) == tuple(top.shape[1:])),
                None)


def _jax_memory(graphs: Mapping[str, GraphSignature], enc: GraphSignature, pos: TensorInfo,
                consts: dict, config: RuntimeConfig, layout: str,
                constant: Callable[[str], np.ndarray], channels: int, grid: tuple[int, int]
                ) -> JaxMemory:
    men, att = graphs["memory_encoder"], graphs["memory_attention"]
    for sig, names in ((men, MEMENC_INPUTS), (att, ATTENTION_INPUTS)):
        if missing := sorted(set(names) - sig.input_names):
            raise LayoutMismatchError(layout, sig.path.name, f"missing inputs {missing}")
    if TPOS_KEY not in consts:
        raise LayoutMismatchError(layout, "constants.json", f"missing key {TPOS_KEY}")
    top = enc.output(EMBEDDINGS[2])
    _same(top, men.input("vision_features"), "memory encoder", men.path.name, layout)
    cur = att.input("current_vision_features")
    tokens = cur.shape[0]
    if cur.shape[-1] != channels or (isinstance(tokens, int) and tokens > 0
                                     and tokens != grid[0] * grid[1]):
        raise LayoutMismatchError(layout, att.path.name, (
            f"current_vision_features {list(cur.shape)} does not fit image_embeddings.2 "
            f"{list(top.shape)}"))
    encoder, attention = LazySession(men.path, config), LazySession(att.path, config)
    tpos = np.asarray(consts[TPOS_KEY], np.float32)
    cm = men.output("memory_tokens").shape[-1] if "memory_tokens" in men.output_names else None
    cm = cm if isinstance(cm, int) and cm > 0 else 64
    memory = JaxMemory(
        encoder=encoder, attention=attention, layout=layout,
        memory_settings=mem.settings_from({"num_maskmem": len(tpos), **consts}), tpos=tpos,
        mask_size=spatial_size(men.input("pred_masks_high_res"), layout, men.path.name),
        channels=channels, grid=grid,
        pointer_encoding=find_pointer_encoding(consts, enc.path.parent, "constants.json", cm,
                                               channels, config, layout),
        position=lambda: constant(pos.name),
    )
    return memory

