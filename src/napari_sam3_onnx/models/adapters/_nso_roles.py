"""The three optional roles of this project's ``nso-sam3`` bundle, as small role objects.

The graph contracts are in :mod:`.nso` (the adapter that composes them): a prompt decoder that
takes the tracker features and returns four candidates with their object pointers, a language
encoder + concept detector on the detector FPN, and the memory encoder + memory attention on the
raw top-level feature ``trk_feat_2``. ``no_mem_embed`` (``(1, C, 1, 1)`` float32, from the
bundle's ``constants.npz``) is added here, once, to the raw feature of a prompted slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..base import Detections, Embedding, MaskCandidates, TextEmbedding
from ..memory import MemoryFrame, MemorySettings
from ..runtime import LazySession
from . import _memory as mem
from . import _tracker_util as tu
from ._common import fixed_dim
from ._concepts import as_declared, cxcywh_to_xyxy, exemplar_slots, sigmoid, token_feed
from ._padding import PaddingDecision, with_padding

DET = ("det_fpn_0", "det_fpn_1", "det_fpn_2")
DECODER_OUTPUTS = ("masks", "iou_scores", "object_score_logits", "object_pointers")
DETECTOR_OUTPUTS = ("pred_logits", "pred_boxes", "pred_masks", "presence_logit")
#: Most clicks the batched prompt decoder gets per call. Every object repeats the image inside
#: the graph (~60 MB of fp32 intermediates each at 1008 px), so per-click time stops improving
#: beyond a few clicks while the memory grows with the batch: at full depth on a 2-core CPU,
#: 16 clicks per call cost 0.27 s per click with a 1.0 GB peak, 64 the same with 4.8 GB
#: (docs/automatic.md, "Speed").
MAX_CLICKS_PER_CALL = 8


@dataclass
class NsoPromptDecoder:
    """The ``nso-sam3`` prompt decoder, as a :class:`~..roles.PromptDecoder`.

    Attributes
    ----------
    session : LazySession
        The decoder graph.
    mask_size : tuple of int
        ``(L, L)`` of ``mask_input`` and of the returned masks.
    label_dtype : numpy.dtype
        Declared dtype of ``point_labels``.
    padding : PaddingDecision
        Whether the graph appends SAM's padding point itself.
    no_mem : numpy.ndarray
        ``(1, C, 1, 1)`` float32 ``no_mem_embed``.
    batched : bool
        The graph has a dynamic batch axis (bundles exported before that take one object per
        call).
    accepts_mask_input : bool
        Always True: the graph takes ``mask_input`` and ``has_mask_input``.
    """

    session: LazySession
    mask_size: tuple[int, int]
    label_dtype: np.dtype
    padding: PaddingDecision
    no_mem: np.ndarray
    batched: bool
    accepts_mask_input: bool = True

    def _top(self, embedding: Embedding) -> np.ndarray:
        """The decoder's ``image_embed``: conditioned, or raw ``trk_feat_2`` + no_mem_embed."""
        feats = embedding.features
        top = feats.get(mem.CONDITIONED)
        if top is None:  # a prompted slice: raw feature + no_mem_embed, added exactly once
            top = feats["trk_feat_2"] + self.no_mem
        return np.asarray(top, np.float32)

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """Decode ``(N, 2)`` float32 model-input ``(x, y)`` points with ``(N,)`` labels.

        No points is SAM's empty prompt (a tracked slice). The object pointer kept is upstream's:
        the best-IoU multimask token's for <= 1 prompt point, token 0's otherwise.
        """
        pts, labs = tu.order_prompt(points_xy, labels)
        n_points = len(labs)
        if n_points == 0:  # SAM's empty prompt (a tracked slice): one point (0, 0), label -1
            pts, labs = np.zeros((1, 2), np.float32), np.full(1, -1, np.int64)
        pts, labs = with_padding(pts, labs, self.padding)
        feats = embedding.features
        has = mask_input is not None
        mask = (np.asarray(mask_input, np.float32).reshape(1, 1, *self.mask_size) if has
                else np.zeros((1, 1, *self.mask_size), np.float32))
        out = self.session.run(DECODER_OUTPUTS, {
            "image_embed": self._top(embedding), "trk_feat_0": feats["trk_feat_0"],
            "trk_feat_1": feats["trk_feat_1"], "point_coords": pts[None],
            "point_labels": labs[None].astype(self.label_dtype), "mask_input": mask,
            "has_mask_input": np.array([1.0 if has else 0.0], np.float32),
        })
        logits = out["masks"].reshape(-1, *self.mask_size).astype(np.float32)
        iou = out["iou_scores"].reshape(-1).astype(np.float32)
        pointers = out["object_pointers"].reshape(len(iou), -1).astype(np.float32)
        k = 1 + int(np.argmax(iou[1:])) if n_points <= 1 else 0
        return MaskCandidates(logits=logits, iou=iou,
                              object_score=float(out["object_score_logits"].reshape(-1)[0]),
                              single_mask_first=True, extras={"object_pointer": pointers[k]})

    def predict_point_batch(
        self, embedding: Embedding, points_xy: np.ndarray
    ) -> list[MaskCandidates]:
        """Decode each of ``(B, 2)`` float32 points as its own click, in one call if batched."""
        pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
        one = np.ones(1, np.int64)
        if not self.batched or len(pts) <= 1:
            return [self.predict_masks(embedding, p[None], one) for p in pts]
        return [c for s in range(0, len(pts), MAX_CLICKS_PER_CALL)
                for c in self._decode_clicks(embedding, pts[s:s + MAX_CLICKS_PER_CALL])]

    def _decode_clicks(self, embedding: Embedding, pts: np.ndarray) -> list[MaskCandidates]:
        """One batched decoder call: ``(B, 2)`` points, each its own positive click."""
        feats = embedding.features
        out = self.session.run(DECODER_OUTPUTS, {
            "image_embed": self._top(embedding), "trk_feat_0": feats["trk_feat_0"],
            "trk_feat_1": feats["trk_feat_1"], "point_coords": pts[:, None, :],
            "point_labels": np.ones((len(pts), 1), self.label_dtype),
            "mask_input": np.zeros((1, 1, *self.mask_size), np.float32),
            "has_mask_input": np.zeros(1, np.float32),
        })
        logits = out["masks"].reshape(len(pts), -1, *self.mask_size).astype(np.float32)
        iou = out["iou_scores"].reshape(len(pts), -1).astype(np.float32)
        obj = out["object_score_logits"].reshape(len(pts), -1)[:, 0]
        pointers = out["object_pointers"].reshape(len(pts), iou.shape[1], -1)
        best = 1 + np.argmax(iou[:, 1:], axis=1)  # one click: the best multimask token's
        return [MaskCandidates(logits=logits[b], iou=iou[b], object_score=float(obj[b]),
                               single_mask_first=True,
                               extras={"object_pointer": pointers[b, best[b]].astype(np.float32)})
                for b in range(len(pts))]


@dataclass
class NsoDetector:
    """The ``nso-sam3`` language encoder + concept detector, as a :class:`~..roles.ConceptDetector`.

    Attributes
    ----------
    language, detector : LazySession
        The two graphs.
    slots : int or None
        Exemplar-box slots of the detector (``exemplar_boxes`` dim 0; None: dynamic).
    mask_size : tuple of int
        ``(L, L)`` of ``pred_masks``.
    layout : str
        For messages.
    min_score : float
        Raw heads: no cut inside the graph (0.0).
    """

    language: LazySession
    detector: LazySession
    slots: int | None
    mask_size: tuple[int, int]
    layout: str
    min_score: float = 0.0

    @property
    def context_length(self) -> int:
        """``tokens`` dim 1 of the language encoder."""
        sig = self.language.signature
        return fixed_dim(sig.input("tokens"), 1, self.layout, sig.path.name)

    @property
    def max_exemplars(self) -> int | None:
        """Exemplar-box slots (None: dynamic)."""
        return self.slots

    def encode_text(self, token_ids: Sequence[int], text: str = "") -> TextEmbedding:
        """Run the language encoder on CLIP ids (0-padded to :attr:`context_length`)."""
        feed = token_feed(token_ids, self.context_length, pad=0)
        out = self.language.run(["text_features", "text_mask"], {"tokens": feed})
        return TextEmbedding(text or " ".join(str(int(t)) for t in token_ids), out)

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Detect the concept; exemplar boxes ``(K, 4)`` cx, cy, w, h normalised to [0, 1].

        Scores are ``sigmoid(logit) * sigmoid(presence)`` with no cut.
        """
        missing = [n for n in DET if n not in embedding.features]
        missing += [n for n in ("text_features", "text_mask") if n not in text.features]
        if missing:
            raise ValueError(f"The embedding or text given to the {self.layout} bundle lacks "
                             f"{missing}; encode the image and the text with this bundle.")
        coords, labels, padding = exemplar_slots(boxes_cxcywh, box_labels, self.slots,
                                                 self.layout)
        sig = self.detector.signature
        feeds = {n: embedding.features[n] for n in DET}
        feeds.update(text_features=text.features["text_features"],
                     text_mask=text.features["text_mask"],
                     exemplar_boxes=as_declared(coords[:, None, :], sig.input("exemplar_boxes")),
                     exemplar_labels=as_declared(labels[:, None], sig.input("exemplar_labels")),
                     exemplar_padding=as_declared(padding[None], sig.input("exemplar_padding")))
        out = self.detector.run(DETECTOR_OUTPUTS, feeds)
        logits = np.asarray(out["pred_logits"], np.float32).reshape(-1)
        presence = np.asarray(out["presence_logit"], np.float32).reshape(-1)[0]
        n = logits.shape[0]
        return Detections(
            scores=sigmoid(logits) * sigmoid(presence),
            boxes=cxcywh_to_xyxy(out["pred_boxes"]).reshape(n, 4),
            masks=np.asarray(out["pred_masks"], np.float32).reshape(n, *self.mask_size),
            mask_kind="logits", min_score=0.0)


@dataclass
class NsoMemory:
    """The ``nso-sam3`` memory encoder + memory attention, as a :class:`~..roles.MemoryGraphs`.

    Attributes
    ----------
    encoder, attention : LazySession
        The two memory graphs.
    memory_settings : MemorySettings
        The bank settings from ``constants.npz``.
    pos_enc : numpy.ndarray
        ``maskmem_pos_enc``, the bundle's one position encoding of a memory (shared by every
        :class:`MemoryFrame`, not copied).
    mask_size : tuple of int
        ``(L, L)`` of the memory encoder's ``mask_logits``.
    channels : int
        ``C`` of the top-level feature and of an object pointer.
    memory_note : str
        No caveat for this bundle.
    """

    encoder: LazySession
    attention: LazySession
    memory_settings: MemorySettings
    pos_enc: np.ndarray
    mask_size: tuple[int, int]
    channels: int
    memory_note: str = ""

    def memory_encode(
        self,
        embedding: Embedding,
        mask_logits: np.ndarray,
        object_score: float,
        is_mask_from_points: bool,
    ) -> MemoryFrame:
        """Encode one slice's ``(h, w)`` logits; features ``(C_m, g, g)`` float32."""
        sig = self.encoder.signature
        out = self.encoder.run(["memory_feat"], {
            "trk_feat_2": embedding.features["trk_feat_2"],
            "mask_logits": tu.mask_for_memory(mask_logits, self.mask_size),
            "object_score_logits": tu.feed_like(sig.input("object_score_logits"), object_score),
            "is_mask_from_points": tu.feed_like(sig.input("is_mask_from_points"),
                                                bool(is_mask_from_points)),
        })
        return MemoryFrame(out["memory_feat"][0].astype(np.float32), self.pos_enc)

    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        """Condition ``trk_feat_2`` on the bank (``pointer_tpos`` = offset / (max_ptrs - 1))."""
        rows, ptrs, offs = mem.check_memory_args(memories, memory_rows, pointers,
                                                 pointer_offsets, self.memory_settings,
                                                 self.channels)
        norm = max(1, (self.memory_settings.max_obj_ptrs or 16) - 1)
        out = self.attention.run(["conditioned_feat"], {
            "trk_feat_2": embedding.features["trk_feat_2"],
            "memory_feats": np.stack([m.features for m in memories]).astype(np.float32),
            "memory_rows": rows, "pointers": ptrs, "pointer_tpos": offs / np.float32(norm),
        })
        return mem.conditioned(embedding, out["conditioned_feat"].astype(np.float32))
