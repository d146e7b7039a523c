"""Adapter for ``Autognosi/sam3-onnx-vulkan`` (int8, five graphs; facts from its card).

Contract (docs/layouts.md#autognosi-int8): ``vision_encoder`` (``pixel_values``
``[1,3,S,S]``, mean = std = 0.5) -> ``fpn_0..2``; ``text_encoder`` (HF style: ``input_ids``
padded with 49407, ``attention_mask`` int64 1 = token) -> ``text_features``; ``detector`` ->
``pred_masks_bits`` uint8 ``[1,Q,L,L/8]`` (binary masks bit-packed along the width),
``pred_boxes`` xyxy normalised, ``pred_logits [1,Q]``, ``presence_logits``;
``tracker_vision_encoder`` -> ``image_embeddings_0/1/2``; ``prompt_decoder`` (``input_points
[1,P,N,2]`` model-input pixels, ``input_labels [1,P,N]``) -> ``pred_masks [1,P,4,L,L]`` (token 0
single-mask, 1-3 multimask), ``iou_scores``, ``object_score_logits``.

The bit order of ``pred_masks_bits`` is not published. It is decided once per adapter, on the
first detection that can tell: the order whose unpacked masks' bounding boxes agree best with
``pred_boxes`` wins (:func:`bit_order_errors`); until then numpy's default ("big") is used. Set
:attr:`AutognosiAdapter.force_bit_order` (or the detector role's ``bit_order``) to force one.
The detector has no exemplar inputs. Encoding runs both image encoders (two ViT passes);
:meth:`AutognosiAdapter.encode_for` runs only the one a workflow needs, and
:meth:`AutognosiAdapter.complete` adds the other when another workflow asks for the same image.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from typing_extensions import override

from ..base import Capability, Detections, Embedding, MaskCandidates, SamAdapter, TextEmbedding
from ..errors import CapabilityError, LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from ._common import as_float32, encoder_feed, fixed_dim, require_names, spatial_size
from ._concepts import EOT, as_declared, find_graph, missing_graphs, sigmoid, token_feed
from ._padding import PaddingDecision, decide_padding, with_padding

FPN = ("fpn_0", "fpn_1", "fpn_2")
EMBEDDINGS = ("image_embeddings_0", "image_embeddings_1", "image_embeddings_2")
TEXT_IN = ("input_ids", "attention_mask")
DETECTOR_IN = (*FPN, "text_features", "attention_mask")
DETECTOR_OUT = ("pred_masks_bits", "pred_boxes", "pred_logits", "presence_logits")
PROMPT_IN = ("input_points", "input_labels", *EMBEDDINGS)
PROMPT_OUT = ("pred_masks", "iou_scores", "object_score_logits")
OUTPUTS_OF = {"vision_encoder": FPN, "tracker_encoder": EMBEDDINGS}
#: Which image encoder each workflow needs: the detector's for concepts, the tracker's else.
ENCODER_FOR = {Capability.TEXT: "vision_encoder", Capability.EXEMPLARS: "vision_encoder",
               Capability.CLICKS: "tracker_encoder", Capability.BOXES: "tracker_encoder",
               Capability.MEMORY: "tracker_encoder", Capability.ENCODE: "tracker_encoder"}
WANTED = {
    "vision_encoder": "pixel_values -> fpn_0..2",
    "text_encoder": "input_ids, attention_mask -> text_features",
    "detector": "fpn_0..2, text_features, attention_mask -> pred_masks_bits, pred_boxes, ...",
    "tracker_encoder": "pixel_values -> image_embeddings_0..2",
    "prompt_decoder": "image_embeddings_0..2, input_points, input_labels -> pred_masks, ...",
}


def bit_order_errors(bits: np.ndarray, boxes_xyxy: np.ndarray) -> dict[str, float]:
    """Disagreement of each bit order's masks with the predicted boxes.

    Parameters
    ----------
    bits : numpy.ndarray
        ``(Q, H, W/8)`` uint8 masks packed along the width.
    boxes_xyxy : numpy.ndarray
        ``(Q, 4)`` normalised ``(x0, y0, x1, y1)``.

    Returns
    -------
    dict
        ``{"big": e, "little": e}``: the summed absolute difference, in mask pixels, between
        each non-empty unpacked mask's bounding box (pixel edges) and its box.
    """
    h, w = bits.shape[1], bits.shape[2] * 8
    scale = np.array([w, h, w, h], np.float32)
    errors = {}
    for order in ("big", "little"):
        masks = np.unpackbits(bits, axis=-1, bitorder=order).astype(bool)
        cols, rows = np.asarray(masks.any(axis=1)), np.asarray(masks.any(axis=2))  # (Q, W), (Q, H)
        total = 0.0
        for q in np.flatnonzero(cols.any(axis=1)):
            c, r = np.flatnonzero(cols[q]), np.flatnonzero(rows[q])
            bb = np.array([c[0], r[0], c[-1] + 1, r[-1] + 1], np.float32)
            total += float(np.abs(bb - boxes_xyxy[q] * scale).sum())
        errors[order] = total
    return errors


def _image_input(sig: GraphSignature, layout: str) -> TensorInfo:
    if len(sig.inputs) != 1 or sig.inputs[0].rank != 4:
        raise LayoutMismatchError(layout, sig.path.name, "expected one [1,3,S,S] image input, "
                                  f"found {[(t.name, t.shape) for t in sig.inputs]}")
    return sig.inputs[0]


@dataclass
class AutognosiPromptDecoder:
    """The prompt decoder on the tracker encoder's features, as a :class:`~..roles.PromptDecoder`.

    It takes ``image_embeddings_0/1/2``, ``input_points [1,1,N,2]`` and ``input_labels [1,1,N]``
    and no mask prompt; ``check`` refuses an embedding without the tracker features.
    """

    session: LazySession
    padding: PaddingDecision
    layout: str
    check: Callable[[Embedding], None]
    accepts_mask_input: bool = False

    @property
    def mask_size(self) -> tuple[int, int]:
        """``(height, width)`` of ``pred_masks``."""
        sig = self.session.signature
        return spatial_size(sig.output("pred_masks"), self.layout, sig.path.name)

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """Decode ``(N, 2)`` model-input ``(x, y)`` points with ``(N,)`` labels."""
        if mask_input is not None:
            raise ValueError(f"the {self.layout} prompt decoder takes no mask prompt")
        self.check(embedding)
        pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
        labs = np.asarray(labels).reshape(-1)
        if len(pts) == 0 or len(pts) != len(labs):
            raise ValueError(f"need one label per point, got {len(pts)} points, {len(labs)} labels")
        pts, labs = with_padding(pts, labs, self.padding)
        sig = self.session.signature
        feeds = {n: embedding.features[n] for n in EMBEDDINGS}
        feeds["input_points"] = as_declared(pts[None, None], sig.input("input_points"))
        feeds["input_labels"] = as_declared(labs[None, None], sig.input("input_labels"))
        out = self.session.run(PROMPT_OUT, feeds)
        logits = out["pred_masks"].reshape(-1, *self.mask_size).astype(np.float32)
        return MaskCandidates(
            logits=logits,
            iou=out["iou_scores"].reshape(-1).astype(np.float32),
            object_score=float(out["object_score_logits"].reshape(-1)[0]),
            single_mask_first=logits.shape[0] == 4,
        )


@dataclass
class AutognosiDetector:
    """Text encoder + detector (no exemplars), as a :class:`~..roles.ConceptDetector`.

    Attributes
    ----------
    text_encoder, detector : LazySession
        The two graphs.
    mask_size : tuple of int
        ``(L, L)`` of the unpacked masks (packing may round the width up to a multiple of 8).
    layout : str
        For messages.
    check : callable
        Refuses an embedding without the detector's ``fpn_*`` features.
    bit_order : str or None
        ``"big"`` or ``"little"`` once decided (or forced); None: not decided yet.
    min_score : float
        Raw heads: no cut inside the graph.
    max_exemplars : int or None
        0: the detector takes no exemplar boxes.
    """

    text_encoder: LazySession
    detector: LazySession
    mask_size: tuple[int, int]
    layout: str
    check: Callable[[Embedding], None]
    bit_order: str | None = None
    min_score: float = 0.0
    max_exemplars: int | None = 0

    @property
    def context_length(self) -> int:
        """``input_ids`` dim 1 of the text encoder."""
        sig = self.text_encoder.signature
        return fixed_dim(sig.input("input_ids"), 1, self.layout, sig.path.name)

    def encode_text(self, token_ids: Sequence[int], text: str = "") -> TextEmbedding:
        """HF-style: ids padded with the end token 49407, ``attention_mask`` 1 on real tokens."""
        ids = token_feed(token_ids, self.context_length, pad=EOT)
        mask = np.zeros_like(ids)
        mask[0, : len(token_ids)] = 1
        out = self.text_encoder.run(["text_features"], {"input_ids": ids, "attention_mask": mask})
        return TextEmbedding(text or " ".join(str(int(t)) for t in token_ids),
                             {"text_features": out["text_features"], "attention_mask": mask})

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Detect the concept from text alone; binary ``(N, L, L)`` masks, no score cut.

        Raises
        ------
        CapabilityError
            Exemplar boxes were given (this detector has no exemplar inputs).
        """
        if boxes_cxcywh is not None and len(boxes_cxcywh) > 0:
            raise CapabilityError(self.layout, Capability.EXEMPLARS.value)
        self.check(embedding)
        feeds = {**{n: embedding.features[n] for n in FPN}, **text.features}
        out = self.detector.run(DETECTOR_OUT, feeds)
        bits = out["pred_masks_bits"].reshape(-1, *out["pred_masks_bits"].shape[-2:])
        boxes = np.asarray(out["pred_boxes"], np.float32).reshape(-1, 4)
        scores = sigmoid(out["pred_logits"].reshape(-1)) * sigmoid(
            out["presence_logits"].reshape(-1)[0])
        order = self.bit_order or self._decide(bits, boxes, scores) or "big"
        masks = np.unpackbits(bits, axis=-1, bitorder=order)  # type: ignore[call-overload]
        masks = masks[..., : self.mask_size[1]]  # packing may round the width up to 8
        return Detections(scores.astype(np.float32), boxes, masks, "binary", min_score=0.0)

    def _decide(self, bits: np.ndarray, boxes: np.ndarray, scores: np.ndarray) -> str | None:
        keep = scores > 0.5 if (scores > 0.5).any() else np.ones_like(scores, bool)
        err = bit_order_errors(bits[keep], boxes[keep])
        if abs(err["big"] - err["little"]) < 0.5:
            return None  # these masks cannot tell the orders apart; decide later
        self.bit_order = min(err, key=err.__getitem__)
        return self.bit_order


class AutognosiAdapter(SamAdapter):
    """Text search (no exemplars) plus clicks and boxes through the prompt decoder."""

    layout = "autognosi-int8"
    #: Set to "big" or "little" to force the detector's mask bit order (None: decide it).
    force_bit_order: str | None = None

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Pick the five graphs; None when neither anchor is present.

        Anchors: a detector with ``pred_masks_bits`` or a prompt decoder with
        ``image_embeddings_0/1/2`` + ``input_points``; then the other four graphs must exist.
        """
        detector = find_graph(graphs, outputs=["pred_masks_bits"])
        prompt = find_graph(graphs, ["input_points", *EMBEDDINGS])
        anchor = detector or prompt
        if anchor is None:
            return None
        roles = {
            "vision_encoder": find_graph(graphs, outputs=FPN),
            "text_encoder": find_graph(graphs, TEXT_IN, ["text_features"]),
            "detector": detector,
            "tracker_encoder": find_graph(graphs, outputs=EMBEDDINGS),
            "prompt_decoder": prompt,
        }
        missing_graphs(cls.layout, anchor, roles, WANTED, graphs)
        return roles  # type: ignore[return-value]

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        require_names(graphs["text_encoder"], self.layout, TEXT_IN, ["text_features"])
        require_names(graphs["detector"], self.layout, DETECTOR_IN, DETECTOR_OUT)
        require_names(graphs["prompt_decoder"], self.layout, PROMPT_IN, PROMPT_OUT)
        self.sessions = {role: LazySession(g.path, config) for role, g in graphs.items()}
        self._vision = _image_input(graphs["vision_encoder"], self.layout)
        self._tracker = _image_input(graphs["tracker_encoder"], self.layout)
        #: Does the prompt decoder append SAM's padding point itself?
        self.padding = decide_padding(graphs["prompt_decoder"], "input_points", "input_labels",
                                      True)
        self._attach_prompt_decoder(AutognosiPromptDecoder(
            self.sessions["prompt_decoder"], self.padding, self.layout,
            lambda embedding: self._check(embedding, Capability.CLICKS)))  # clicks, boxes
        #: The concept-detector role (text encoder + detector); its ``bit_order`` is decided
        #: on the first detection that can tell.
        self.concepts = AutognosiDetector(
            self.sessions["text_encoder"], self.sessions["detector"], self.mask_size,
            self.layout, lambda embedding: self._check(embedding, Capability.TEXT),
            bit_order=self.force_bit_order)
        self._attach_detector(self.concepts, exemplars=False)  # text

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        order = self.concepts.bit_order or "not decided yet (big until a detection tells)"
        return {
            "padding": asm.padding(self.padding),
            "normalisation": asm.normalisation(self._vision, self._name("vision_encoder")),
            "mask kind": ("detector: binary, bit-packed; prompt decoder: logits",
                          "detector/prompt decoder outputs"),
            "mask bit order": (order, "forced" if self.force_bit_order else
                               "decided from boxes vs masks on the first clear detection"),
            "score cut": ("none (sigmoid(logit) * sigmoid(presence); caller's floor)",
                          asm.CONTRACT),
        }

    def _name(self, role: str) -> str:
        return self.sessions[role].path.name

    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._vision, self.layout, self._name("vision_encoder"))

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        sig = self.sessions["prompt_decoder"].signature
        return spatial_size(sig.output("pred_masks"), self.layout, sig.path.name)

    def encode(self, rgb: np.ndarray) -> Embedding:
        """Run both image encoders on a ``(rows, cols, 3)`` uint8 RGB image (two ViT passes)."""
        return self._run_encoders(rgb, ("vision_encoder", "tracker_encoder"))

    def encode_for(self, rgb: np.ndarray, need: Capability) -> Embedding:
        """One ViT pass: the detector's ``fpn_*`` for text, the tracker's for clicks/boxes."""
        return self._run_encoders(rgb, (ENCODER_FOR[need],))

    @override
    def lacks(self, embedding: Embedding, need: Capability) -> bool:
        return any(n not in embedding.features for n in OUTPUTS_OF[ENCODER_FOR[need]])

    def complete(self, embedding: Embedding, rgb: np.ndarray, need: Capability) -> Embedding:
        """Add the encoder ``need`` uses when ``embedding`` lacks it (one more ViT pass)."""
        if not self.lacks(embedding, need):
            return embedding
        extra = self._run_encoders(rgb, (ENCODER_FOR[need],))
        return Embedding({**embedding.features, **extra.features}, embedding.input_size,
                         embedding.image_shape)

    def _run_encoders(self, rgb: np.ndarray, roles: Sequence[str]) -> Embedding:
        features: dict[str, np.ndarray] = {}
        feeds: dict[tuple, np.ndarray] = {}  # both encoders usually take the same image feed
        for role in roles:
            info = self._vision if role == "vision_encoder" else self._tracker
            key = (info.dtype, info.rank, tuple(info.shape))
            if key not in feeds:
                feeds[key] = encoder_feed(rgb, info, self.layout, self._name(role))
            features.update(as_float32(self.sessions[role].run(list(OUTPUTS_OF[role]),
                                                               {info.name: feeds[key]})))
        return Embedding(features, self.input_size, (int(rgb.shape[0]), int(rgb.shape[1])))

    def _check(self, embedding: Embedding, need: Capability) -> None:
        if self.lacks(embedding, need):
            raise ValueError(
                f"This embedding holds no {ENCODER_FOR[need]} features (encoded for another "
                f"workflow); complete it with complete(embedding, rgb, {need.name}).")

    @override
    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
