"""Adapter for the SAM 3.1 ComicApp export (``comicbox/sam3.1-comicapp-onnx``; card only).

Known (docs/layouts.md#comicapp-sam31): an image encoder ``[1,3,S,S]``
(mean = std = 0.5, possibly float16) with four feature levels of which the prompt graphs take the
first three; a concept prompt graph returning ``pred_logits [1,Q,1]``, ``pred_boxes [1,Q,4]``
cxcywh normalised, ``pred_masks [1,Q,L,L]`` logits and ``presence_logit [1,1]``; a box prompt
graph. Unknown: every input name, where the text features come from, the box graph's contract.

So roles are found by introspection: the prompt graphs by those four outputs (the one with
exemplar-box inputs is the box graph), the encoder as the graph with one 3-channel image input
and at least three feature-map outputs (levels ordered largest first, the first three fed), the
language encoder as a graph taking ``tokens`` (0-padded) or ``input_ids`` (49407-padded), and
each prompt input by :func:`._introspect.classify_inputs`. A layout that does not fit raises
:class:`LayoutMismatchError` with what was found. Scores are
``sigmoid(logit) * sigmoid(presence)`` (whether this export folds presence into the logits is
unknown), with no cut.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
from typing_extensions import override

from ..base import Embedding, SamAdapter
from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from ._comic_detector import OUTPUTS, ComicDetector
from ._common import as_float32, encoder_feed, fixed_dim, spatial_size
from ._concepts import (
    missing_graphs,
)
from ._introspect import classify_inputs
from ._levels import split_outputs

WANTED = {
    "encoder": "one [1,3,S,S] image input -> four feature levels",
    "language": "tokens or input_ids -> text features",
}


def _levels(sig: GraphSignature) -> list[TensorInfo]:
    """Feature maps, largest first; position encodings (:mod:`._levels`) are not levels."""
    split = split_outputs(sig)
    maps = [t for t in sig.outputs if t.rank == 4 and t not in split.positions.values()
            and t not in split.tracker and "pos" not in t.name.lower()]
    return sorted(maps, key=lambda t: -t.shape[-1] if isinstance(t.shape[-1], int) else 0)


def find_encoder(graphs: Mapping[str, GraphSignature]) -> GraphSignature | None:
    """The graph with one ``[1,3,S,S]`` input and at least three rank-4 outputs."""
    for name in sorted(graphs):
        g = graphs[name]
        if (len(g.inputs) == 1 and g.inputs[0].rank == 4 and g.inputs[0].shape[1] == 3
                and len(_levels(g)) >= 3):
            return g
    return None


def find_language(graphs: Mapping[str, GraphSignature]) -> GraphSignature | None:
    """A graph taking ``tokens`` or ``input_ids`` and returning a rank-3 float tensor."""
    for name in sorted(graphs):
        g = graphs[name]
        if g.input_names & {"tokens", "input_ids"} and any(
                t.rank == 3 and t.dtype.startswith("float") for t in g.outputs):
            return g
    return None


def _has_boxes(g: GraphSignature) -> bool:
    """Whether the graph takes boxes ``[1, K, 4]``.

    A text-feature input of width 4 (small graphs) is not a box input: inputs named for boxes
    decide when there are any.
    """
    four = [t for t in g.inputs if t.rank == 3 and t.shape[-1] == 4]
    named = [t for t in four if "box" in t.name.lower()]
    return bool(named) or any("text" not in t.name.lower() for t in four)


def _text_output(lang: GraphSignature, width: object, other: str | None = None) -> str | None:
    """The language output of ``width`` (rank 3), preferring names with features/memory."""
    found = [t for t in lang.outputs if t.rank == 3 and t.shape[-1] == width and t.name != other]
    found.sort(key=lambda t: not any(w in t.name for w in ("feature", "memory")))
    return found[0].name if found else None


class ComicAppAdapter(SamAdapter):
    """Text (and, through the box graph, exemplar) concept search for SAM 3.1 ComicApp."""

    layout = "comicapp-sam3.1"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: a graph with ``pred_logits, pred_boxes, pred_masks, presence_logit``."""
        prompts = [graphs[n] for n in sorted(graphs) if set(OUTPUTS) <= graphs[n].output_names]
        if not prompts:
            return None
        side = next((g for g in prompts if not _has_boxes(g)), prompts[0])
        box = next((g for g in prompts if _has_boxes(g) and g is not side), None)
        roles = {"encoder": find_encoder(graphs), "language": find_language(graphs)}
        missing_graphs(cls.layout, side, roles, WANTED, graphs)
        return {**roles, "side": side, **({"box": box} if box else {})}  # type: ignore[dict-item]

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc, lang = graphs["encoder"], graphs["language"]
        self.encoder = LazySession(enc.path, config)
        self.language = LazySession(lang.path, config)
        self._image = enc.inputs[0]
        self._levels = _levels(enc)[:3]
        self._split = split_outputs(enc)
        self._position_names = {t.name for t in self._split.positions.values()}
        self._constants: dict[str, np.ndarray] | None = None
        self._lock = threading.Lock()
        self._hf = "input_ids" in lang.input_names
        ids = lang.input("input_ids" if self._hf else "tokens")
        self._ids_name = ids.name
        self._context = fixed_dim(ids, 1, self.layout, lang.path.name)
        self.prompts: dict[str, tuple[LazySession, dict[str, TensorInfo]]] = {}
        for role in ("side", "box"):
            if role in graphs:
                found = classify_inputs(graphs[role], self._levels, self._context, self.layout,
                                        self._position_names)
                self.prompts[role] = (LazySession(graphs[role].path, config), found)
        side = self.prompts["side"][1]
        self._text_out = _text_output(lang, side["text_features"].shape[-1])
        self._embeds_out = (_text_output(lang, side["text_embeds"].shape[-1], self._text_out)
                            if "text_embeds" in side else None)
        self._mask_out = next((t.name for t in lang.outputs if t.dtype == "bool"), None)
        self._positions = self._position_sources()
        if self._text_out is None or (not self._hf and self._mask_out is None):
            raise LayoutMismatchError(
                self.layout, lang.path.name, "needs a text-feature output of width "
                f"{side['text_features'].shape[-1]} and "
                "(for 'tokens') a bool pad mask; found "
                f"{[(t.name, t.shape) for t in lang.outputs]}")
        self._exemplar_role = next((r for r in ("box", "side") if r in self.prompts
                                    and "box_coords" in self.prompts[r][1]), None)
        #: The concept-detector role (language encoder + prompt graphs).
        self.concepts = ComicDetector(
            language=self.language, prompts=self.prompts, levels=self._levels,
            layout=self.layout, hf=self._hf, ids_name=self._ids_name, text_out=self._text_out,
            mask_out=self._mask_out, context_length=self._context,
            exemplar_role=self._exemplar_role, constants=self.constants,
            positions=self._positions, embeds_out=self._embeds_out,
        )
        self._attach_detector(self.concepts, exemplars=self._exemplar_role is not None)

    def _position_sources(self) -> dict[int, str]:
        """Level index -> encoder output for every ``position_i`` input of the prompt graphs."""
        out: dict[int, str] = {}
        wanted = {int(r[-1]): t for _, roles in self.prompts.values()
                  for r, t in roles.items() if r.startswith("position_")}
        for i, info in wanted.items():
            if info.name in self.encoder.signature.output_names:
                out[i] = info.name
            elif i in self._split.positions:
                out[i] = self._split.positions[i].name
            else:
                raise LayoutMismatchError(self.layout, self.encoder.path.name,
                                          f"no position encoding of level {i} for "
                                          f"{info.name}{list(info.shape)}")
        return out

    def constants(self) -> dict[str, np.ndarray]:
        """Position encodings the prompt graphs take (image-independent; one blank encode)."""
        if self._constants is None and self._positions:
            self.encode(np.zeros((*self.input_size, 3), np.uint8))
        return dict(self._constants or {})

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        out = {
            "normalisation": asm.normalisation(self._image, self.encoder.path.name),
            "mask kind": ("logits", asm.CONTRACT),
            "score cut": ("none (sigmoid(logit) * sigmoid(presence); presence not folded)",
                          asm.CONTRACT),
            "text ids": ("input_ids padded with 49407" if self._hf else "tokens padded with 0",
                         f"{self.language.path.name} input name"),
            "feature levels": (", ".join(t.name for t in self._levels),
                               f"{self.encoder.path.name}: largest three of its maps"),
            "padding": asm.no_prompt_decoder(),
        }
        if self._positions:
            out["position encodings"] = (
                ", ".join(f"level {i}: {n}" for i, n in sorted(self._positions.items())),
                f"{self.encoder.path.name}: told apart by {self._split.how}")
        if "text_embeds" in self.prompts["side"][1]:
            out["text embeds"] = (str(self._embeds_out), "widths of the text outputs")
        tokens = {r["text_features"].shape[0 if r["text_features"].shape[1] == 1 else 1]
                  for _, r in self.prompts.values()}
        longer = sorted(t for t in tokens if isinstance(t, int) and t > self._context)
        out["text context"] = (
            f"{self._context} tokens" + (f", zero-padded (masked) to the prompt graph's "
                                         f"{longer[0]}" if longer else ""),
            f"{self.language.path.name} id input; prompt graph text input")
        for role, (session, roles) in self.prompts.items():
            out[f"{role} graph roles"] = (", ".join(f"{r}={t.name}" for r, t in roles.items()),
                                          f"{session.path.name} ranks, dtypes and shapes")
        return out

    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._image, self.layout, self.encoder.path.name)

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        return self.concepts.mask_size

    def encode(self, rgb: np.ndarray) -> Embedding:
        """Encode a ``(rows, cols, 3)`` uint8 RGB image; only the first three levels are kept."""
        feed = encoder_feed(rgb, self._image, self.layout, self.encoder.path.name)
        first = self._constants is None
        consts = sorted(set(self._positions.values())) if first else []
        out = as_float32(self.encoder.run([t.name for t in self._levels] + consts,
                                          {self._image.name: feed}))
        if first:
            with self._lock:
                self._constants = {n: out.pop(n) for n in consts}
        return Embedding(out, self.input_size, (int(rgb.shape[0]), int(rgb.shape[1])))

    @override
    def close(self) -> None:
        for session in (self.encoder, self.language, *(s for s, _ in self.prompts.values())):
            session.close()


class PixlAdapter(ComicAppAdapter):
    """PIXL's SAM 3 and EfficientSAM3 exports (``xuckless/pixl-*-onnx``; docs/models.md).

    Recognised by the text encoder's published outputs ``language_features`` and
    ``language_padding`` next to a graph with ComicApp's four outputs; the rest (the decoder's
    inputs, the encoder's output names) is found as for ComicApp: position encodings by name or,
    failing that, as the encoder outputs that do not read the image (:mod:`._levels`), a third
    text output by its width, a 16-token student text context padded to the decoder's 32.
    """

    layout = "pixl-sam3"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """ComicApp's match, when the language encoder has PIXL's output names."""
        if not any({"language_features", "language_padding"} <= g.output_names
                   for g in graphs.values()):
            return None
        return super().match(graphs)
