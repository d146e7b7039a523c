"""Adapter for ``samexporter`` >= 0.5 SAM 3 bundles (raw detector heads).

Contract (docs/layouts.md#samexporter-05): encoder and language encoder as
wkentaro v0.3 (:mod:`._wk_family`); the decoder may declare ``original_height/width``,
``vision_pos_enc_0..2``, ``backbone_fpn_0..2``, ``language_mask``, ``language_features``,
``language_embeds``, ``box_coords [K,1,4]``, ``box_labels [K,1]``, ``box_masks [1,K]`` (onnxsim
may prune unused ones, so only declared inputs are fed; K is read from ``box_coords``) and returns
raw heads: ``pred_boxes [1,Q,4]`` cxcywh normalised, ``pred_logits [1,Q,1]``,
``pred_masks [1,Q,L,L]`` logits, ``presence_logit_dec [1,1]``.

Scores are ``sigmoid(pred_logits) * sigmoid(presence_logit_dec)`` for every query, with no cut
(``Detections.min_score = 0``); the caller applies its floor (SAM 3 uses 0.5).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..base import Detections
from ..graph_info import GraphSignature
from ._concepts import cxcywh_to_xyxy, find_graph, missing_graphs, sigmoid
from ._wk_family import WANTED, WkFamilyAdapter, find_image_encoder, find_language_encoder

OUTPUTS = ("pred_boxes", "pred_logits", "pred_masks", "presence_logit_dec")


class SamexporterAdapter(WkFamilyAdapter):
    """Text, exemplar and box prompts with samexporter's raw-head decoder."""

    layout = "samexporter-0.5"
    decoder_outputs = OUTPUTS
    mask_output = "pred_masks"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: the raw-head decoder; then the encoder and language encoder must exist."""
        decoder = find_graph(graphs, outputs=OUTPUTS)
        if decoder is None:
            return None
        roles = {"encoder": find_image_encoder(graphs), "language": find_language_encoder(graphs)}
        missing_graphs(cls.layout, decoder, roles, WANTED, graphs)
        return {**roles, "decoder": decoder}  # type: ignore[dict-item]

    def _detections(self, out: Mapping[str, np.ndarray],
                    image_shape: tuple[int, int]) -> Detections:
        logits = np.asarray(out["pred_logits"], np.float32).reshape(-1)
        presence = np.asarray(out["presence_logit_dec"], np.float32).reshape(-1)[0]
        n = logits.shape[0]
        return Detections(
            scores=sigmoid(logits) * sigmoid(presence),
            boxes=cxcywh_to_xyxy(out["pred_boxes"]).reshape(n, 4),
            masks=np.asarray(out["pred_masks"], np.float32).reshape(n, *self.mask_size),
            mask_kind="logits",
            min_score=0.0,
        )
