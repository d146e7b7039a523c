"""A SAM-2-style point decoder whose input/output names are matched tolerantly.

wkentaro v0.6.0 ships ``sam3_point_decoder.onnx`` but its names are not published
(docs/layouts.md#wkentaro-v06). By analogy with osam's SAM 2 decoder they are
probably ``image_embeddings``, ``high_res_features1``, ``high_res_features2``, ``point_coords
[1,N,2]`` (model-input pixels), ``point_labels [1,N]``, ``mask_input [1,1,L,L]``,
``has_mask_input [1]`` (+ maybe ``orig_im_size``) -> ``masks``, ``iou_predictions``,
``low_res_masks``. Each role accepts a few spellings seen in SAM 2 exports; feature inputs with an
unknown name are placed by their ``(channels, rows, cols)`` among the encoder's outputs. Anything
left over raises :class:`LayoutMismatchError` listing what was expected and what was found.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

import numpy as np

from ..base import Embedding, MaskCandidates
from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo
from ..runtime import LazySession, RuntimeConfig
from ._concepts import as_declared
from ._padding import decide_padding, with_padding

FEATURES = ("image_embeddings", "high_res_features1", "high_res_features2")
INPUT_ALIASES = {
    "image_embeddings": ("image_embeddings", "image_embed", "image_embedding"),
    "high_res_features1": ("high_res_features1", "high_res_feats_0", "high_res_features_0"),
    "high_res_features2": ("high_res_features2", "high_res_feats_1", "high_res_features_1"),
    "point_coords": ("point_coords", "input_points", "points"),
    "point_labels": ("point_labels", "input_labels", "labels"),
    "mask_input": ("mask_input", "input_masks", "mask_inputs"),
    "has_mask_input": ("has_mask_input", "has_mask"),
    "orig_im_size": ("orig_im_size", "original_size", "orig_size"),
}
REQUIRED = (*FEATURES, "point_coords", "point_labels")
IOU_ALIASES = ("iou_predictions", "iou_scores", "scores", "iou")
LOW_RES_ALIASES = ("low_res_masks", "low_res_mask", "low_res_logits")
#: Reported as the object score: these graphs have no object-presence output.
PRESENT = 10.0


def looks_like_point_decoder(sig: GraphSignature) -> bool:
    """True for a graph taking point coordinates and at least one float feature map.

    Point coordinates are an input with a known name or any float ``[.., N, 2]`` input.
    """
    pointish = any(
        t.name in INPUT_ALIASES["point_coords"]
        or (t.rank == 3 and t.shape[-1] == 2 and t.dtype.startswith("float"))
        for t in sig.inputs
    )
    return pointish and any(t.rank == 4 and t.dtype.startswith("float") for t in sig.inputs)


def _shape(info: TensorInfo) -> tuple:
    return tuple(info.shape[1:])


class PointDecoder:
    """Roles of a point decoder's inputs/outputs, and how to run it.

    Parameters
    ----------
    sig : GraphSignature
        The point decoder.
    encoder_outputs : Mapping[str, TensorInfo]
        The encoder outputs that can feed it (``image_embeddings``, ``high_res_features1/2``).
    layout : str
        For messages.
    config : RuntimeConfig
        Session options.
    """

    def __init__(self, sig: GraphSignature, encoder_outputs: Mapping[str, TensorInfo],
                 layout: str, config: RuntimeConfig) -> None:
        self.layout = layout
        self.roles: dict[str, str] = {}
        for role, aliases in INPUT_ALIASES.items():
            hit = next((a for a in aliases if a in sig.input_names), None)
            if hit is not None:
                self.roles[role] = hit
        placed = set(self.roles.values())
        for role in FEATURES:  # unknown spellings: place by (channels, rows, cols)
            if role in self.roles or role not in encoder_outputs:
                continue
            want = _shape(encoder_outputs[role])
            fits = [t.name for t in sig.inputs if t.name not in placed and t.rank == 4
                    and _shape(t) == want]
            if len(fits) == 1:
                self.roles[role] = fits[0]
                placed.add(fits[0])
        iou = next((n for n in IOU_ALIASES if n in sig.output_names), None)
        low_res = next((n for n in LOW_RES_ALIASES if n in sig.output_names), None)
        missing = [r for r in REQUIRED if r not in self.roles]
        missing += [r for r in FEATURES if r in self.roles and r not in encoder_outputs]
        leftover = sorted(sig.input_names - set(self.roles.values()))
        if missing or leftover or iou is None or low_res is None:
            self._fail(sig, missing, leftover, iou, low_res)
        #: The IoU and low-res mask outputs (by their names in this graph).
        self.iou: str = iou
        self.low_res: str = low_res
        self.sources = {self.roles[f]: f for f in FEATURES}
        self.session = LazySession(sig.path, config)
        #: Does the graph append SAM's padding point itself?
        self.padding = decide_padding(sig, self.roles["point_coords"], self.roles["point_labels"],
                                      True)
        self.mask_size = self._mask_size(sig, encoder_outputs)

    def _mask_size(self, sig: GraphSignature, encoder_outputs: Mapping[str, TensorInfo]
                   ) -> tuple[int, int]:
        """Low-res mask size: from the mask output, else the mask prompt, else the 4x level."""
        candidates = [sig.output(self.low_res)]
        if "mask_input" in self.roles:
            candidates.append(sig.input(self.roles["mask_input"]))
        candidates += [encoder_outputs[f] for f in FEATURES[1:2] if f in encoder_outputs]
        for info in candidates:
            h, w = info.shape[-2:]
            if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
                return h, w
        raise LayoutMismatchError(self.layout, sig.path.name, "the mask size is not declared")

    def _fail(self, sig: GraphSignature, missing: list[str], leftover: list[str],
              iou: str | None, low_res: str | None) -> NoReturn:
        parts = []
        if missing:
            parts.append(f"no input found for {missing}")
        if leftover:
            parts.append(f"inputs {leftover} have no known role")
        if iou is None:
            parts.append(f"no IoU output (one of {list(IOU_ALIASES)})")
        if low_res is None:
            parts.append(f"no low-res mask output (one of {list(LOW_RES_ALIASES)})")
        found_in = ", ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in sig.inputs)
        found_out = ", ".join(f"{t.name}{list(t.shape)}" for t in sig.outputs)
        raise LayoutMismatchError(
            self.layout, sig.path.name,
            f"as a point decoder: {'; '.join(parts)}. Expected inputs "
            f"{list(REQUIRED)} (+ optional mask_input, has_mask_input, orig_im_size) and outputs "
            f"iou_predictions, low_res_masks; found inputs ({found_in}) and outputs ({found_out})",
        )

    @property
    def accepts_mask_input(self) -> bool:
        """Whether the graph takes a previous low-res mask."""
        return "mask_input" in self.roles and "has_mask_input" in self.roles

    def predict_masks(
        self,
        embedding: Embedding,
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None = None,
    ) -> MaskCandidates:
        """The :class:`~napari_sam3_onnx.models.roles.PromptDecoder` role: see :meth:`run`.

        Raises
        ------
        ValueError
            A mask prompt for a graph that takes none, or points and labels that do not pair.
        """
        if mask_input is not None and not self.accepts_mask_input:
            raise ValueError(f"the {self.layout} point decoder takes no mask prompt")
        return self.run(embedding.features, points_xy, labels, mask_input, embedding.input_size)

    def run(
        self,
        features: Mapping[str, np.ndarray],
        points_xy: np.ndarray,
        labels: np.ndarray,
        mask_input: np.ndarray | None,
        input_size: tuple[int, int],
    ) -> MaskCandidates:
        """Decode one object from ``(N, 2)`` model-input ``(x, y)`` points and ``(N,)`` labels."""
        sig = self.session.signature
        pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
        labs = np.asarray(labels).reshape(-1)
        if len(pts) == 0 or len(pts) != len(labs):
            raise ValueError(f"need one label per point, got {len(pts)} points, {len(labs)} labels")
        pts, labs = with_padding(pts, labs, self.padding)
        feeds = {name: features[src] for name, src in self.sources.items()}
        feeds[self.roles["point_coords"]] = as_declared(pts[None], sig.input(
            self.roles["point_coords"]))
        feeds[self.roles["point_labels"]] = as_declared(labs[None], sig.input(
            self.roles["point_labels"]))
        if "mask_input" in self.roles:
            info = sig.input(self.roles["mask_input"])
            given = mask_input is not None and "has_mask_input" in self.roles
            m = np.asarray(mask_input, np.float32) if given else np.zeros(self.mask_size,
                                                                           np.float32)
            feeds[info.name] = as_declared(m.reshape(1, 1, *m.shape[-2:]), info)
            if "has_mask_input" in self.roles:
                flag = sig.input(self.roles["has_mask_input"])
                feeds[flag.name] = as_declared(np.array([1.0 if given else 0.0]), flag)
        if "orig_im_size" in self.roles:
            feeds[self.roles["orig_im_size"]] = as_declared(
                np.array(input_size), sig.input(self.roles["orig_im_size"]))
        out = self.session.run([self.low_res, self.iou], feeds)
        logits = out[self.low_res].reshape(-1, *self.mask_size).astype(np.float32)
        return MaskCandidates(
            logits=logits,
            iou=out[self.iou].reshape(-1).astype(np.float32),
            object_score=PRESENT,
            single_mask_first=logits.shape[0] == 4,
        )
