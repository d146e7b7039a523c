"""Adapters for ``wkentaro/sam3-onnx`` v0.3.0 (what osam ships) and v0.6.0 (card only).

Contract (docs/layouts.md#wkentaro-v03, #wkentaro-v06): encoder, language encoder
and concept decoder as in :mod:`._wk_family`. The v0.3 decoder has one exemplar slot, v0.6 has 16
(read from ``box_coords`` dim 0, never assumed). Its outputs are final: ``boxes [N,4]`` xyxy
normalised, ``scores [N]`` already cut at SAM 3's 0.5 inside the graph (so
``Detections.min_score = 0.5``), ``masks [N,1,L,L]`` sigmoid probabilities.

A box prompt runs the detector with the text ``"visual"`` and the box as the one positive
exemplar (as osam does); the engine keeps the detection that overlaps the box. v0.6 adds
``sam3_point_decoder.onnx`` for clicks (and mask prompts), fed by three extra encoder outputs
``image_embeddings``, ``high_res_features1``, ``high_res_features2``
(:mod:`._point_decoder`, names matched tolerantly).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from typing_extensions import override

from ..base import Detections
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from ._concepts import find_graph, missing_graphs
from ._point_decoder import FEATURES, PointDecoder, looks_like_point_decoder
from ._wk_family import (
    FPN,
    WANTED,
    WkFamilyAdapter,
    find_image_encoder,
    find_language_encoder,
)

OUTPUTS = ("boxes", "scores", "masks")
#: The score cut traced into wkentaro's decoders (upstream ``confidence_threshold``).
BAKED_SCORE_CUT = 0.5


def find_final_decoder(graphs: Mapping[str, GraphSignature], original_size: bool = False
                       ) -> GraphSignature | None:
    """The decoder with final outputs ``boxes, scores, masks`` and exemplar slots.

    ``original_size`` selects the v0.2.0 decoders (``original_height/width`` inputs, outputs in
    original pixels); otherwise they are left out.
    """
    for name in sorted(graphs):
        g = graphs[name]
        if (g.output_names == set(OUTPUTS) and "box_coords" in g.input_names
                and ("original_height" in g.input_names) == original_size):
            return g
    return None


class WkentaroV03Adapter(WkFamilyAdapter):
    """Text, exemplar and box prompts with the three v0.3.0 graphs."""

    layout = "wkentaro-v0.3"
    decoder_outputs = OUTPUTS
    mask_output = "masks"
    score_cut = BAKED_SCORE_CUT

    #: v0.2.0 decoders take the original image size and answer in it.
    original_size = False

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: the final-output decoder; then the encoder and language encoder must exist."""
        decoder = find_final_decoder(graphs, cls.original_size)
        if decoder is None:
            return None
        roles = {"encoder": find_image_encoder(graphs), "language": find_language_encoder(graphs)}
        missing_graphs(cls.layout, decoder, roles, WANTED, graphs)
        return {**roles, "decoder": decoder}  # type: ignore[dict-item]

    def _detections(self, out: Mapping[str, np.ndarray],
                    image_shape: tuple[int, int]) -> Detections:
        scores = np.asarray(out["scores"], np.float32).reshape(-1)
        n = scores.shape[0]
        return Detections(
            scores=scores,
            boxes=np.asarray(out["boxes"], np.float32).reshape(n, 4),
            masks=np.asarray(out["masks"], np.float32).reshape(n, *self.mask_size),
            mask_kind="probabilities",
            min_score=BAKED_SCORE_CUT,
        )


class WkentaroV02Adapter(WkentaroV03Adapter):
    """The v0.2.0 decoder (``rusen/sam3-browser-int8`` re-quantises it to int8).

    Its inputs begin with ``original_height``/``original_width`` (int64 scalars, the encoded
    image's rows and columns); it wraps upstream's grounding post-processing, so ``boxes`` are
    x0, y0, x1, y1 in **original pixels** (normalised here by the size that was fed),
    ``scores`` are already cut at 0.5 and ``masks`` ``[N,1,rows,cols]`` are at the original
    size (bool, or probabilities: thresholded at 0.5 either way).
    """

    layout = "wkentaro-v0.2"
    original_size = True

    def _detections(self, out: Mapping[str, np.ndarray],
                    image_shape: tuple[int, int]) -> Detections:
        scores = np.asarray(out["scores"], np.float32).reshape(-1)
        n = scores.shape[0]
        rows, cols = image_shape
        boxes = np.asarray(out["boxes"], np.float32).reshape(n, 4)
        masks = np.asarray(out["masks"])
        masks = masks.reshape(n, *masks.shape[-2:]).astype(np.float32)
        return Detections(
            scores=scores,
            boxes=boxes / np.array([cols, rows, cols, rows], np.float32),
            masks=masks,
            mask_kind="binary" if out["masks"].dtype == np.bool_ else "probabilities",
            min_score=BAKED_SCORE_CUT,
        )

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        return {**super().assumptions(),
                "mask kind": ("at the original image size (bool or probabilities)",
                              f"{self.decoder.path.name} output masks"),
                "boxes": ("original pixels, normalised by the size fed to original_height/"
                          "width", f"{self.decoder.path.name} inputs")}


class WkentaroV06Adapter(WkentaroV03Adapter):
    """v0.3's concept path with 16 exemplar slots, plus clicks through the point decoder."""

    layout = "wkentaro-v0.6"

    @classmethod
    def match(cls, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """Anchor: an encoder giving both ``backbone_fpn_*`` and the point-decoder features."""
        encoder = find_graph(graphs, ["image"], (*FPN, *FEATURES))
        if encoder is None:
            return None
        decoder = find_final_decoder(graphs)
        taken = {encoder.path} | ({decoder.path} if decoder else set())
        points = next((graphs[n] for n in sorted(graphs)
                       if graphs[n].path not in taken and looks_like_point_decoder(graphs[n])),
                      None)
        roles = {"language": find_language_encoder(graphs), "decoder": decoder, "points": points}
        wanted = {**WANTED, "points": "image_embeddings, high_res_features1/2, point_coords, "
                                      "point_labels -> iou_predictions, low_res_masks"}
        missing_graphs(cls.layout, encoder, roles, wanted, graphs)
        return {"encoder": encoder, **roles}  # type: ignore[dict-item]

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        super().__init__(graphs, config)
        enc = graphs["encoder"]
        self.points = PointDecoder(
            graphs["points"], {f: enc.output(f) for f in FEATURES if f in enc.output_names},
            self.layout, config,
        )
        needed = [f for f in self.points.sources.values() if f not in self._image_names]
        self._image_names = (*self._image_names, *needed)
        self._attach_prompt_decoder(self.points)  # clicks, boxes, mask prompts

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        roles = ", ".join(f"{r}={n}" for r, n in sorted(self.points.roles.items()))
        return {**super().assumptions(), "padding": asm.padding(self.points.padding),
                "point decoder roles": (roles, f"{self.points.session.path.name} input names "
                                        "and shapes")}

    @property
    def point_session(self) -> LazySession:
        """The point decoder's session."""
        return self.points.session

    @override
    def close(self) -> None:
        super().close()
        self.points.session.close()
