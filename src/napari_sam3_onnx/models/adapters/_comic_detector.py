"""The concept-detector role of the SAM 3.1 ComicApp bundle (language encoder + prompt graphs).

The prompt graphs' inputs were assigned roles by :func:`._introspect.classify_inputs`
(``feature_0..2``, ``text_features``, ``text_mask``, optional ``box_coords``/``box_labels``/
``box_padding`` and ``height``/``width``); this role only feeds them. Scores are
``sigmoid(logit) * sigmoid(presence)`` with no cut (docs/layouts.md#comicapp-sam31).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..base import Capability, Detections, Embedding, TextEmbedding
from ..errors import CapabilityError
from ..graph_info import TensorInfo
from ..runtime import LazySession
from ._common import spatial_size
from ._concepts import (
    EOT,
    as_declared,
    cxcywh_to_xyxy,
    exemplar_slots,
    sigmoid,
    slot_count,
    token_feed,
)
from ._introspect import batch_first

OUTPUTS = ("pred_logits", "pred_boxes", "pred_masks", "presence_logit")


@dataclass
class ComicDetector:
    """Language encoder + concept prompt graphs, as a :class:`~..roles.ConceptDetector`.

    Attributes
    ----------
    language : LazySession
        The language encoder.
    prompts : dict
        ``"side"`` (text) and optionally ``"box"``: each a session and its input roles.
    levels : sequence of TensorInfo
        The encoder outputs fed as ``feature_0..2``.
    layout : str
        For messages.
    hf : bool
        ``input_ids`` padded with 49407 (+ ``attention_mask``) rather than 0-padded ``tokens``.
    ids_name, text_out : str
        The language encoder's id input and text-feature output.
    mask_out : str or None
        Its bool pad-mask output (``tokens`` flavour only).
    context_length : int
        Token context length.
    exemplar_role : str or None
        The prompt graph that takes exemplar boxes (None: no exemplars).
    min_score : float
        No cut inside these graphs.
    """

    language: LazySession
    prompts: Mapping[str, tuple[LazySession, dict[str, TensorInfo]]]
    levels: Sequence[TensorInfo]
    layout: str
    hf: bool
    ids_name: str
    text_out: str
    mask_out: str | None
    context_length: int
    exemplar_role: str | None
    min_score: float = 0.0

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of the text graph's ``pred_masks``."""
        sig = self.prompts["side"][0].signature
        return spatial_size(sig.output("pred_masks"), self.layout, sig.path.name)

    @property
    def max_exemplars(self) -> int | None:
        """Exemplar slots of the exemplar graph (0: none; None: dynamic)."""
        if self.exemplar_role is None:
            return 0
        info = self.prompts[self.exemplar_role][1]["box_coords"]
        return slot_count(info, 1 if batch_first(info) else 0)

    def encode_text(self, token_ids: Sequence[int], text: str = "") -> TextEmbedding:
        """Run the language encoder; features are kept as ``text [T, C]`` and ``valid [T]``."""
        ids = token_feed(token_ids, self.context_length, pad=EOT if self.hf else 0)
        valid = np.zeros(self.context_length, bool)
        valid[: len(token_ids)] = True
        feeds = {self.ids_name: ids, "attention_mask": valid[None].astype(np.int64)}
        wanted = [self.text_out] + ([] if self.hf else [self.mask_out])
        out = self.language.run(wanted, feeds)  # type: ignore[arg-type]
        feat = np.asarray(out[self.text_out], np.float32)
        feat = feat[0] if feat.shape[0] == 1 else feat[:, 0]
        if self.mask_out is not None and not self.hf:  # the graph's own pad mask
            valid = ~np.asarray(out[self.mask_out]).reshape(-1).astype(bool)
        return TextEmbedding(text or " ".join(str(int(t)) for t in token_ids),
                             {"text": feat, "valid": valid})

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Detect the concept; exemplar boxes ``(K, 4)`` cx, cy, w, h normalised to [0, 1]."""
        given = boxes_cxcywh is not None and len(boxes_cxcywh) > 0
        if given and self.exemplar_role is None:
            raise CapabilityError(self.layout, Capability.EXEMPLARS.value)
        session, roles = self.prompts[self.exemplar_role if given else "side"]  # type: ignore
        feeds = self._feature_feeds(embedding, roles)
        feeds.update(self._text_feeds(text, roles))
        if "box_coords" in roles:
            feeds.update(self._slot_feeds(boxes_cxcywh, box_labels, roles))
        for axis, role in enumerate(("height", "width")):
            if role in roles:
                feeds[roles[role].name] = as_declared(embedding.image_shape[axis], roles[role])
        out = session.run(OUTPUTS, feeds)
        logits = np.asarray(out["pred_logits"], np.float32).reshape(-1)
        n = logits.shape[0]
        return Detections(
            scores=sigmoid(logits) * sigmoid(np.asarray(out["presence_logit"]).reshape(-1)[0]),
            boxes=cxcywh_to_xyxy(out["pred_boxes"]).reshape(n, 4),
            masks=np.asarray(out["pred_masks"], np.float32).reshape(n, *self.mask_size),
            mask_kind="logits",
            min_score=0.0,
        )

    def _feature_feeds(self, embedding: Embedding, roles: Mapping[str, TensorInfo]
                       ) -> dict[str, np.ndarray]:
        return {roles[f"feature_{i}"].name: as_declared(embedding.features[t.name],
                                                        roles[f"feature_{i}"])
                for i, t in enumerate(self.levels) if f"feature_{i}" in roles}

    @staticmethod
    def _text_feeds(text: TextEmbedding, roles: Mapping[str, TensorInfo]
                    ) -> dict[str, np.ndarray]:
        t_info, m_info = roles["text_features"], roles["text_mask"]
        feat, valid = text.features["text"], text.features["valid"]
        mask = ~valid if m_info.dtype == "bool" else valid
        return {
            t_info.name: as_declared(feat[None] if batch_first(t_info) else feat[:, None],
                                     t_info),
            m_info.name: as_declared(mask[None] if batch_first(m_info) else mask[:, None],
                                     m_info),
        }

    def _slot_feeds(self, boxes_cxcywh: np.ndarray | None, box_labels: np.ndarray | None,
                    roles: Mapping[str, TensorInfo]) -> dict[str, np.ndarray]:
        slots = slot_count(roles["box_coords"], 1 if batch_first(roles["box_coords"]) else 0)
        coords, labels, padding = exemplar_slots(boxes_cxcywh, box_labels, slots, self.layout)
        if "valid" in roles["box_padding"].name.lower():
            padding = ~padding
        feeds = {}
        for role, value in (("box_coords", coords), ("box_labels", labels),
                            ("box_padding", padding)):
            info = roles[role]
            feeds[info.name] = as_declared(value[None] if batch_first(info) else value[:, None],
                                           info)
        return feeds
