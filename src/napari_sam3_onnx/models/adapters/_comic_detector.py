"""The concept-detector role of the SAM 3.1 ComicApp bundle (language encoder + prompt graphs).

The prompt graphs' inputs were assigned roles by :func:`._introspect.classify_inputs`
(``feature_0..2``, ``position_0..2``, ``text_features``, ``text_mask``, optional
``text_embeds``, ``box_coords``/``box_labels``/``box_padding``, ``geometry_features``/
``geometry_mask`` and ``height``/``width``); this role only feeds them. Scores are
``sigmoid(logit) * sigmoid(presence)`` with no cut (docs/layouts.md#comicapp-sam31), or
``sigmoid(logit)`` where the graph has no presence output or its presence is a constant (read
from its nodes: a constant presence carries no information, and multiplying
``sigmoid(0) = 0.5`` in would halve every score). The same role
serves the DETR-style heads of the Hugging Face ``Sam3Model`` family (:mod:`.hf_sam3`), whose
names, box format (xyxy) and mask polarity (True = token) differ: see :class:`HeadNames`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
#: The label of an unused exemplar slot where a graph has no padding input (``Sam3Model``'s
#: ``input_boxes_labels``: 1 positive, 0 negative, -10 padding).
PAD_LABEL = -10


@dataclass(frozen=True)
class HeadNames:
    """How to read a DETR-style head and build its masks.

    Attributes
    ----------
    presence : str or None
        The presence output to multiply in (None: absent, or a constant in the graph).
    box_format : {"cxcywh", "xyxy"}
        ``pred_boxes`` as normalised centre/size (SAM 3 upstream) or corners (Hugging Face).
    true_is_pad : bool
        A **bool** text or slot mask: True marks padding (upstream) or a real entry (Hugging
        Face). Integer masks are always 1 = real entry.
    """

    presence: str | None = "presence_logit"
    box_format: str = "cxcywh"
    true_is_pad: bool = True

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs to ask for."""
        return (*OUTPUTS[:3], *([self.presence] if self.presence else []))


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
    heads : HeadNames
        Output names, box format and mask polarity.
    constants, positions
        Position-encoding feeds (see the attributes).
    embeds_out : str or None
        See the attribute.
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
    heads: HeadNames = HeadNames()
    #: Image-independent encoder outputs (position encodings) by name, for ``position_i``.
    constants: Callable[[], Mapping[str, np.ndarray]] | None = None
    #: The encoder output feeding ``position_i`` (by level index).
    positions: Mapping[int, str] | None = None
    #: A second text output (e.g. ``language_embeds``) for a ``text_embeds`` input.
    embeds_out: str | None = None
    #: Runs a geometry encoder on exemplar boxes ``(K, 4)`` cxcywh and labels ``(K,)``; returns
    #: the feeds of the detector's ``geometry_features`` / ``geometry_mask`` (None: no encoder).
    geometry: Callable[[Embedding, np.ndarray, np.ndarray], dict[str, np.ndarray]] | None = None

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of the text graph's ``pred_masks``."""
        sig = self.prompts["side"][0].signature
        return spatial_size(sig.output("pred_masks"), self.layout, sig.path.name)

    @property
    def max_exemplars(self) -> int | None:
        """Exemplar slots of the exemplar graph (0: none; None: dynamic)."""
        if self.exemplar_role is None:
            return None if self.geometry is not None else 0
        info = self.prompts[self.exemplar_role][1]["box_coords"]
        return slot_count(info, 1 if batch_first(info) else 0)

    def encode_text(self, token_ids: Sequence[int], text: str = "") -> TextEmbedding:
        """Run the language encoder; features are kept as ``text [T, C]`` and ``valid [T]``."""
        ids = token_feed(token_ids, self.context_length, pad=EOT if self.hf else 0)
        valid = np.zeros(self.context_length, bool)
        valid[: len(token_ids)] = True
        feeds = {self.ids_name: ids, "attention_mask": valid[None].astype(np.int64)}
        feeds = {k: v for k, v in feeds.items() if k in self.language.signature.input_names}
        wanted = [self.text_out, *([self.embeds_out] if self.embeds_out else []),
                  *([] if self.hf or self.mask_out is None else [self.mask_out])]
        out = self.language.run(wanted, feeds)
        feat = _sequence(out[self.text_out])
        if self.mask_out is not None and not self.hf:  # the graph's own pad mask
            valid = ~np.asarray(out[self.mask_out]).reshape(-1).astype(bool)
        found = {"text": feat, "valid": valid}
        if self.embeds_out:
            found["embeds"] = _sequence(out[self.embeds_out])
        return TextEmbedding(text or " ".join(str(int(t)) for t in token_ids), found)

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Detect the concept; exemplar boxes ``(K, 4)`` cx, cy, w, h normalised to [0, 1]."""
        given = boxes_cxcywh is not None and len(boxes_cxcywh) > 0
        if given and self.exemplar_role is None and self.geometry is None:
            raise CapabilityError(self.layout, Capability.EXEMPLARS.value)
        role = self.exemplar_role if given and self.exemplar_role else "side"
        session, roles = self.prompts[role]
        feeds = self._feature_feeds(embedding, roles)
        feeds.update(self._text_feeds(text, roles))
        if "box_coords" in roles:
            feeds.update(self._slot_feeds(boxes_cxcywh, box_labels, roles))
        for axis, role in enumerate(("height", "width")):
            if role in roles:
                feeds[roles[role].name] = as_declared(embedding.image_shape[axis], roles[role])
        if "geometry_features" in roles:
            if given and self.geometry is not None:
                labels = (np.ones(len(boxes_cxcywh), np.int64) if box_labels is None  # type: ignore
                          else np.asarray(box_labels).astype(np.int64).reshape(-1))
                feeds.update(self.geometry(embedding, np.asarray(boxes_cxcywh, np.float32),
                                           labels))
            else:
                feeds.update(self._no_geometry(roles))
        out = session.run(self.heads.outputs, feeds)
        logits = np.asarray(out["pred_logits"], np.float32).reshape(-1)
        n = logits.shape[0]
        scores = sigmoid(logits)
        if self.heads.presence:
            scores = scores * sigmoid(np.asarray(out[self.heads.presence]).reshape(-1)[0])
        boxes = np.asarray(out["pred_boxes"], np.float32).reshape(n, 4)
        return Detections(
            scores=scores,
            boxes=cxcywh_to_xyxy(boxes) if self.heads.box_format == "cxcywh" else boxes,
            masks=np.asarray(out["pred_masks"], np.float32).reshape(n, *self.mask_size),
            mask_kind="logits",
            min_score=0.0,
        )

    def _feature_feeds(self, embedding: Embedding, roles: Mapping[str, TensorInfo]
                       ) -> dict[str, np.ndarray]:
        feeds = {roles[f"feature_{i}"].name: as_declared(embedding.features[t.name],
                                                         roles[f"feature_{i}"])
                 for i, t in enumerate(self.levels) if f"feature_{i}" in roles}
        wanted = [i for i in range(3) if f"position_{i}" in roles]
        if wanted:
            if self.constants is None or self.positions is None:
                raise CapabilityError(self.layout, "position encodings")
            consts = self.constants()
            for i in wanted:
                info = roles[f"position_{i}"]
                feeds[info.name] = as_declared(consts[self.positions[i]], info)
        return feeds

    def _text_feeds(self, text: TextEmbedding, roles: Mapping[str, TensorInfo]
                    ) -> dict[str, np.ndarray]:
        t_info, m_info = roles["text_features"], roles["text_mask"]
        length = _sequence_length(t_info)
        feat, valid = (_pad_to(text.features[k], length) for k in ("text", "valid"))
        mask = ~valid if m_info.dtype == "bool" and self.heads.true_is_pad else valid
        feeds = {
            t_info.name: as_declared(feat[None] if batch_first(t_info) else feat[:, None],
                                     t_info),
            m_info.name: as_declared(mask[None] if batch_first(m_info) else mask[:, None],
                                     m_info),
        }
        if "text_embeds" in roles:
            e_info = roles["text_embeds"]
            emb = _pad_to(text.features["embeds"], length)
            feeds[e_info.name] = as_declared(emb[None] if batch_first(e_info) else emb[:, None],
                                             e_info)
        return feeds

    def _no_geometry(self, roles: Mapping[str, TensorInfo]) -> dict[str, np.ndarray]:
        """One padded geometry row: a text-only search (the row is masked out)."""
        f_info, m_info = roles["geometry_features"], roles["geometry_mask"]
        width = f_info.shape[-1] if isinstance(f_info.shape[-1], int) else 1
        pad = np.array([[self.heads.true_is_pad if m_info.dtype == "bool" else 0]])
        return {f_info.name: as_declared(np.zeros((1, 1, width), np.float32), f_info),
                m_info.name: as_declared(pad, m_info)}

    def _slot_feeds(self, boxes_cxcywh: np.ndarray | None, box_labels: np.ndarray | None,
                    roles: Mapping[str, TensorInfo]) -> dict[str, np.ndarray]:
        slots = slot_count(roles["box_coords"], 1 if batch_first(roles["box_coords"]) else 0)
        coords, labels, padding = exemplar_slots(boxes_cxcywh, box_labels, slots, self.layout)
        if "box_padding" not in roles:  # Sam3Model: an unused slot is labelled -10
            labels = np.where(padding, PAD_LABEL, labels)
        elif "valid" in roles["box_padding"].name.lower() or not self.heads.true_is_pad:
            padding = ~padding
        feeds = {}
        for role, value in (("box_coords", coords), ("box_labels", labels),
                            ("box_padding", padding)):
            if role not in roles:
                continue
            info = roles[role]
            feeds[info.name] = as_declared(value[None] if batch_first(info) else value[:, None],
                                           info)
        return feeds


def _sequence(x: np.ndarray) -> np.ndarray:
    """``[1, T, C]`` or ``[T, 1, C]`` text output -> ``(T, C)`` float32."""
    arr = np.asarray(x, np.float32)
    return arr[0] if arr.shape[0] == 1 else arr[:, 0]


def _sequence_length(info: TensorInfo) -> int | None:
    """The fixed token count of a text input (None: dynamic)."""
    dim = info.shape[1] if batch_first(info) else info.shape[0]
    return dim if isinstance(dim, int) and dim > 0 else None


def _pad_to(x: np.ndarray, length: int | None) -> np.ndarray:
    """Zero-pad (False-pad) the token axis 0 of ``x`` to ``length``.

    A student text encoder with a shorter context (16 tokens) feeds a decoder built for SAM 3's
    32: the extra rows are padding, masked out like any pad token.
    """
    if length is None or x.shape[0] >= length:
        return x
    pad = np.zeros((length - x.shape[0], *x.shape[1:]), x.dtype)
    return np.concatenate([x, pad])
