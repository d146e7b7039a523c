"""Adapter for the onnx-community ``sam3-tracker-ONNX`` pair (HF-Transformers naming).

Contract (docs/layouts.md#hf-tracker): vision encoder
``pixel_values [1,3,S,S]`` float (mean = std = 0.5) -> ``image_embeddings.0/.1/.2``; decoder
``prompt_encoder_mask_decoder`` takes ``input_points [1,1,N,2]`` (model-input pixels),
``input_labels [1,1,N]`` int64, ``input_boxes [1,B,4]`` xyxy model-input pixels and returns
``iou_scores [1,1,3]``, ``pred_masks [1,1,3,L,L]`` logits, ``object_score_logits``. Boxes travel in
``input_boxes`` (the graph pads internally), so label-2/3 point pairs are converted to boxes here.
The decoder is multimask-only: candidates are SAM's three multimask outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from typing_extensions import override

from ..base import Embedding, MaskCandidates, SamAdapter
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from ._common import encode_image, require_names, spatial_size

EMBEDDINGS = ("image_embeddings.0", "image_embeddings.1", "image_embeddings.2")
DECODER_INPUTS = ("input_points", "input_labels", "input_boxes", *EMBEDDINGS)
DECODER_OUTPUTS = ("iou_scores", "pred_masks", "object_score_logits")


@dataclass
class HfPromptDecoder:
    """The HF tracker's prompt decoder, as a :class:`~..roles.PromptDecoder`.

    Boxes travel in ``input_boxes [1,B,4]`` (x0, y0, x1, y1), clicks in ``input_points
    [1,1,N,2]`` / ``input_labels [1,1,N]``; the graph pads them itself and takes no mask prompt.
    """

    session: LazySession
    mask_size: tuple[int, int]
    accepts_mask_input: bool = False
    #: The graph refused zero points once: a box alone gets SAM's padding point from then on.
    _zero_points_fail: bool = field(default=False, init=False)

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """Decode clicks (labels 0/1) and a box (labels 2, 3); ``mask_input`` is not used."""
        points_xy = np.asarray(points_xy, np.float32).reshape(-1, 2)
        labels = np.asarray(labels, np.int64).reshape(-1)
        tl, br = labels == 2, labels == 3
        boxes = np.concatenate([points_xy[tl], points_xy[br]], axis=1) if tl.any() else (
            np.zeros((0, 4), np.float32)
        )
        clicks = ~(tl | br)
        pts, labs = points_xy[clicks], labels[clicks]
        feeds = {
            "input_points": pts[None, None].astype(np.float32),
            "input_labels": labs[None, None],
            "input_boxes": boxes[None].astype(np.float32),
            **{name: embedding.features[name] for name in EMBEDDINGS},
        }
        out = self._run_box_alone(feeds) if len(pts) == 0 else self.session.run(
            DECODER_OUTPUTS, feeds)
        return MaskCandidates(
            logits=out["pred_masks"].reshape(-1, *self.mask_size).astype(np.float32),
            iou=out["iou_scores"].reshape(-1).astype(np.float32),
            object_score=float(out["object_score_logits"].reshape(-1)[0]),
            single_mask_first=False,
        )

    def _run_box_alone(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A box with no clicks: zero points, as transformers' tracker embeds a box alone.

        ``Sam3TrackerModel`` given ``input_boxes`` only embeds the box's corners and adds no
        padding point (the exported graph takes ``input_points [1,1,0,2]``; checked against
        transformers in ``tests/export/test_hf_graphs.py``). A graph that cannot take zero
        points gets one ``(0, 0)`` point with label -1 instead, as SAM's prompt encoder pads.
        """
        if not self._zero_points_fail:
            try:
                return self.session.run(DECODER_OUTPUTS, feeds)
            except Exception:
                self._zero_points_fail = True
        padded = {**feeds, "input_points": np.zeros((1, 1, 1, 2), np.float32),
                  "input_labels": np.full((1, 1, 1), -1, np.int64)}
        return self.session.run(DECODER_OUTPUTS, padded)


class HfTrackerAdapter(SamAdapter):
    """Clicks and boxes with the HF-style tracker pair (no text, no memory graphs)."""

    layout = "hf-tracker"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Pick the encoder and decoder among a folder's graphs (None: not this layout)."""
        decoder = next(
            (g for g in graphs.values()
             if {"input_points", "input_labels", "input_boxes"} <= g.input_names
             and {"iou_scores", "pred_masks"} <= g.output_names
             and "image_embeddings.2" in g.input_names),
            None,
        )
        encoder = next(
            (g for g in graphs.values()
             if set(EMBEDDINGS) <= g.output_names and "pixel_values" in g.input_names),
            None,
        )
        if decoder is None or encoder is None:
            return None
        return {"encoder": encoder, "decoder": decoder}

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        require_names(graphs["encoder"], self.layout, ["pixel_values"], EMBEDDINGS)
        require_names(graphs["decoder"], self.layout, DECODER_INPUTS, DECODER_OUTPUTS)
        self.encoder = LazySession(graphs["encoder"].path, config)
        self.decoder = LazySession(graphs["decoder"].path, config)
        self._input = graphs["encoder"].input("pixel_values")
        self._mask_size = spatial_size(
            graphs["decoder"].output("pred_masks"), self.layout, graphs["decoder"].path.name
        )
        self._attach_prompt_decoder(HfPromptDecoder(self.decoder, self._mask_size))  # clicks, boxes

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        return {
            "padding": ("graph pads (boxes travel in input_boxes; a box alone is sent with "
                        "zero points, as transformers does)", asm.CONTRACT),
            "normalisation": asm.normalisation(self._input, self.encoder.path.name),
            "no-memory embedding": ("inside image_embeddings.2 (HF adds it)", asm.CONTRACT),
            "mask kind": ("logits, multimask only", "decoder outputs"),
        }

    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._input, self.layout, self.encoder.path.name)

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        return self._mask_size

    @override
    def encode(self, rgb: np.ndarray) -> Embedding:
        return encode_image(self.encoder, self._input, self.layout, rgb, EMBEDDINGS)

    @override
    def close(self) -> None:
        self.encoder.close()
        self.decoder.close()
