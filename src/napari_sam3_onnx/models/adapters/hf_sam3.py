"""Adapter for exports of the Hugging Face ``Sam3Model`` family (detector, text, optional tracker).

Published layouts of this family (docs/models.md gives the sources):

* ``danilobukvic/sam3-text-onnx``: ``vision_encoder`` ``pixel_values`` -> ``fpn_hidden_state_0..3``
  + ``fpn_position_encoding_0..3``; ``text_encoder`` ``input_ids`` + ``attention_mask`` (int64,
  1 = token, padded with 49407) -> ``text_features``; ``decoder`` ``fpn_hidden_state_0..2``,
  ``fpn_position_encoding_2``, ``text_features``, ``attention_mask`` -> ``pred_masks``
  (logits), ``pred_boxes`` (normalised xyxy), ``pred_logits`` and no presence output found.
* ``wW-Ww/sam3-ONNX``: one ``vision`` pass -> ``features_288/144/72`` (detector) **and**
  ``image_embeddings.0/1/2`` (tracker); ``text`` -> ``text_features``; ``detector``
  ``features_*``, ``text_features``, ``text_mask`` -> ``pred_*``, ``presence_logits``,
  ``semantic_seg``; the onnx-community ``prompt_encoder_mask_decoder`` for clicks.
* ``parodiniccolo/sam3-dual-webgpu``: an encoder emitting ``fpn_hidden_state_*`` /
  ``fpn_position_encoding_*`` and ``image_embeddings.*``; with danilobukvic's text encoder and
  decoder and onnx-community's prompt decoder in one folder it is the wW-Ww arrangement.
* Intel Geti EfficientSAM3 ``onnx/`` (usls names): ``fpn_feat_0..2``, ``fpn_pos_2``;
  ``text_features``, ``text_mask``; ``prompt-decoder`` also takes ``prompt_features`` /
  ``prompt_mask`` (a geometry encoder's output; a text search sends one masked row), and its
  ``presence_logits`` is a constant in the graph, so it is not multiplied in.

Recognition joins graphs by name: the detector's feature inputs are outputs of the encoder that
takes ``pixel_values``; levels are ordered by size (:mod:`._levels`); the decoder's inputs get
roles from their ranks, dtypes and shapes (:func:`._introspect.classify_inputs`). Masks of this
family use the Hugging Face polarity (1 / True = real token), boxes are normalised xyxy (as
``Sam3Model`` returns them). Where the encoder also emits the tracker's ``image_embeddings.*``,
the onnx-community prompt decoder answers clicks and boxes from the same encode, and the
jax-image-tools memory graphs add propagation (:mod:`._composite`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
from typing_extensions import override

from ..base import Embedding, SamAdapter
from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from . import _composite as comp
from ._comic_detector import ComicDetector, HeadNames
from ._common import as_float32, encoder_feed, fixed_dim, spatial_size
from ._concepts import NUMPY_DTYPES, as_declared, find_graph, missing_graphs
from ._introspect import classify_inputs
from ._levels import EncoderOutputs, constant_outputs, split_outputs
from .hf_tracker import EMBEDDINGS

HEADS = ("pred_logits", "pred_boxes", "pred_masks")
PRESENCE = ("presence_logits", "presence_logit")
WANTED = {"language": "input_ids (+ attention_mask) -> text_features"}
GEOMETRY_IN = {"input_boxes", "input_boxes_labels"}
GEOMETRY_OUT = {"geometry_features", "geometry_mask"}


def _feature_inputs(g: GraphSignature) -> set[str]:
    return {t.name for t in g.inputs if t.rank == 4 and t.dtype.startswith("float")}


def find_detector(graphs: Mapping[str, GraphSignature]
                  ) -> tuple[GraphSignature, GraphSignature] | None:
    """``(encoder, detector)``: a ``pixel_values`` encoder whose outputs feed a DETR head."""
    encoders = [graphs[n] for n in sorted(graphs) if "pixel_values" in graphs[n].input_names]
    for name in sorted(graphs):
        det = graphs[name]
        if not set(HEADS) <= det.output_names or not _feature_inputs(det):
            continue
        enc = next((e for e in encoders if _feature_inputs(det) <= e.output_names), None)
        if enc is not None:
            return enc, det
    return None


class HfSam3Adapter(SamAdapter):
    """Text search (+ clicks, boxes and propagation where the folder has them) on one encode."""

    layout = "hf-sam3"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: a DETR head whose feature inputs are a ``pixel_values`` encoder's outputs."""
        found = find_detector(graphs)
        if found is None:
            return None
        enc, det = found
        roles: dict[str, GraphSignature | None] = {
            "language": find_graph(graphs, ["input_ids"], ["text_features"])}
        missing_graphs(cls.layout, det, roles, WANTED, graphs)
        out = {"encoder": enc, "detector": det, **roles}
        geometry = sorted((g for g in graphs.values() if GEOMETRY_IN <= g.input_names
                           and GEOMETRY_OUT <= g.output_names),
                          key=lambda g: ("exemplar" not in g.path.name, g.path.name))
        if geometry:  # the exemplar variant first, when there are two
            out["geometry"] = geometry[0]
        if set(EMBEDDINGS) <= enc.output_names:
            out.update(comp.match_tracker(graphs))
        return out  # type: ignore[return-value]

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc, det, lang = graphs["encoder"], graphs["detector"], graphs["language"]
        self.encoder = LazySession(enc.path, config)
        self.language = LazySession(lang.path, config)
        self.detector = LazySession(det.path, config)
        self._image = enc.input("pixel_values")
        self.outputs: EncoderOutputs = split_outputs(enc)
        levels = self.outputs.levels
        ids = lang.input("input_ids")
        context = fixed_dim(ids, 1, self.layout, lang.path.name)
        self.roles = classify_inputs(det, levels, context, self.layout)
        self._positions = self._position_sources(enc)
        self._constants: dict[str, np.ndarray] | None = None
        self._lock = threading.Lock()
        text_out = "text_features"
        self.presence, self._presence_note = self._presence(det)
        self.geometry = (LazySession(graphs["geometry"].path, config)
                         if "geometry" in graphs and "geometry_features" in self.roles else None)
        #: The concept-detector role (text encoder + DETR head).
        self.concepts = ComicDetector(
            language=self.language, prompts={"side": (self.detector, self.roles)},
            levels=levels, layout=self.layout, hf=True, ids_name="input_ids",
            text_out=text_out, mask_out=None, context_length=context,
            exemplar_role="side" if "box_coords" in self.roles else None,
            heads=HeadNames(presence=self.presence, box_format="xyxy", true_is_pad=False),
            constants=self.constants, positions=self._positions,
            geometry=self._geometry_feeds if self.geometry is not None else None,
        )
        self._attach_detector(self.concepts, exemplars="box_coords" in self.roles
                              or self.geometry is not None)
        self.tracker: comp.Tracker | None = None
        self._tracker_names: tuple[str, ...] = ()
        if "tracker_decoder" in graphs or "mask_decoder" in graphs:
            self.tracker = comp.open_tracker(graphs, enc, self.outputs, config, self.layout,
                                             self._position_constant)
            self._tracker_names = self.tracker.encoder_outputs
            self._attach_prompt_decoder(self.tracker.decoder)  # clicks, boxes
            if self.tracker.memory is not None:
                self._attach_memory(self.tracker.memory)  # propagation

    def _position_sources(self, enc: GraphSignature) -> dict[int, str]:
        """Level index -> encoder output, for each ``position_i`` input of the detector."""
        out = {}
        for i in range(3):
            info = self.roles.get(f"position_{i}")
            if info is None:
                continue
            if info.name in enc.output_names:
                out[i] = info.name
            elif i in self.outputs.positions:
                out[i] = self.outputs.positions[i].name
            else:
                raise LayoutMismatchError(self.layout, self.detector.path.name,
                                          f"its input {info.name} needs a position encoding "
                                          f"of level {i}, which {enc.path.name} does not emit")
        return out

    def _geometry_feeds(self, embedding: Embedding, boxes: np.ndarray, labels: np.ndarray
                        ) -> dict[str, np.ndarray]:
        """Encode exemplar boxes with the geometry graph; the detector's geometry feeds.

        Boxes are ``(K, 4)`` cx, cy, w, h normalised with labels 1 / 0 (``Sam3Model``'s
        ``input_boxes`` / ``input_boxes_labels``); no points are sent (``[1, 0, 2]``).
        """
        assert self.geometry is not None
        sig, consts = self.geometry.signature, self.constants()
        feeds: dict[str, np.ndarray] = {}
        for t in sig.inputs:
            if t.name in embedding.features:
                feeds[t.name] = as_declared(embedding.features[t.name], t)
            elif t.name in consts:
                feeds[t.name] = as_declared(consts[t.name], t)
        feeds["input_boxes"] = as_declared(boxes[None], sig.input("input_boxes"))
        feeds["input_boxes_labels"] = as_declared(labels[None],
                                                  sig.input("input_boxes_labels"))
        for name, width in (("input_points", 2), ("input_points_labels", 0)):
            if name in sig.input_names:
                shape = (1, 0, width) if width else (1, 0)
                feeds[name] = np.zeros(shape, NUMPY_DTYPES[sig.input(name).dtype])
        if missing := sorted(sig.input_names - set(feeds)):
            raise LayoutMismatchError(self.layout, sig.path.name,
                                      f"inputs {missing} are produced by no graph of the bundle")
        out = self.geometry.run(sorted(GEOMETRY_OUT), feeds)
        return {self.roles[r].name: as_declared(out[r], self.roles[r]) for r in GEOMETRY_OUT}

    @staticmethod
    def _presence(det: GraphSignature) -> tuple[str | None, str]:
        """The presence output to multiply in, and what was found."""
        name = next((n for n in PRESENCE if n in det.output_names), None)
        if name is None:
            return None, "no presence output: scores are sigmoid(logit)"
        constant = constant_outputs(det)
        if constant is not None and name in constant:
            return None, f"{name} is a constant in the graph: not used, scores are sigmoid(logit)"
        return name, f"sigmoid(logit) * sigmoid({name}), no cut"

    # ---- assumptions --------------------------------------------------------------------
    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        det = self.detector.path.name
        out = {
            "normalisation": asm.normalisation(self._image, self.encoder.path.name),
            "feature levels": (", ".join(t.name for t in self.outputs.levels),
                               f"{self.encoder.path.name}: the three largest maps"),
            "position encodings": (", ".join(f"position_{i}={n}" for i, n in
                                             self._positions.items()) or "none taken",
                                   f"{det} inputs" + (f"; told apart by {self.outputs.how}"
                                                      if self._positions else "")),
            "score": (self._presence_note, f"{det} outputs and nodes"),
            "boxes": ("normalised x0, y0, x1, y1 (Sam3Model's pred_boxes)", asm.CONTRACT),
            "mask kind": ("logits", asm.CONTRACT),
            "text ids": ("input_ids padded with 49407, attention_mask 1 = token",
                         f"{self.language.path.name} input names"),
            "text mask": ("1 / True = token (Hugging Face polarity)", asm.CONTRACT),
            "detector roles": (", ".join(f"{r}={t.name}" for r, t in self.roles.items()),
                               f"{det} ranks, dtypes and shapes"),
        }
        if "geometry_features" in self.roles:
            out["geometry prompt"] = ("one masked row (text-only search)", asm.CONTRACT)
        if "box_coords" in self.roles and "box_padding" not in self.roles:
            out["exemplar slots"] = ("unused slots labelled -10; a text-only search sends one "
                                     "such slot (the graph may not take zero boxes)",
                                     "Sam3Model input_boxes_labels convention")
        if self.geometry is not None:
            out["exemplars"] = (f"{self.geometry.path.name}: boxes cx, cy, w, h normalised, "
                                "labels 1 / 0, no points", "Sam3Model input_boxes convention")
        if self.tracker is not None:
            out.update(self.tracker.assumptions())
        else:
            out["padding"] = asm.no_prompt_decoder()
        return out

    # ---- geometry -----------------------------------------------------------------------
    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._image, self.layout, self.encoder.path.name)

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        if self.tracker is not None:
            return self.tracker.decoder.mask_size
        return self.concepts.mask_size

    # ---- encoding -----------------------------------------------------------------------
    def _constant_names(self) -> list[str]:
        names = set(self._positions.values())
        if self.geometry is not None:  # the geometry graph's position inputs
            names |= {t.name for t in self.geometry.signature.inputs
                      if t.name in self.encoder.signature.output_names
                      and t.name not in {lv.name for lv in self.outputs.levels}}
        if self.tracker is not None and self.tracker.position is not None:
            names.add(self.tracker.position)
        return sorted(names)

    @override
    def encode(self, rgb: np.ndarray) -> Embedding:
        """Encode one image: detector levels and tracker maps from one run of the encoder."""
        feed = encoder_feed(rgb, self._image, self.layout, self.encoder.path.name)
        first = self._constants is None
        consts = self._constant_names() if first else []
        names = [t.name for t in self.outputs.levels] + list(self._tracker_names)
        out = as_float32(self.encoder.run(names + consts, {self._image.name: feed}))
        if first:
            with self._lock:
                self._constants = {n: out.pop(n) for n in consts if n not in names}
        if self.tracker is not None:
            out = self.tracker.features(out)
        return Embedding(out, self.input_size, (int(rgb.shape[0]), int(rgb.shape[1])))

    def constants(self) -> dict[str, np.ndarray]:
        """Image-independent encoder outputs (position encodings), one blank encode if needed."""
        if self._constants is None and self._constant_names():
            self.encode(np.zeros((*self.input_size, 3), np.uint8))
        return dict(self._constants or {})

    def _position_constant(self, name: str) -> np.ndarray:
        return self.constants()[name]

    @override
    def close(self) -> None:
        for session in (self.encoder, self.language, self.detector, self.geometry):
            if session is not None:
                session.close()
        if self.tracker is not None:
            self.tracker.close()

