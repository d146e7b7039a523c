"""The ``torch`` modules :mod:`.hf_graphs` exports, one per published graph.

Each cuts a ``transformers`` SAM 3 model at one published graph's boundary (inputs and outputs in
the published order).

Split out of :mod:`.hf_graphs` (which builds the models and exports them); export environment
only (``torch`` and ``transformers``).
"""

from __future__ import annotations

import torch
from torch import nn


class TrackerVision(nn.Module):
    """``pixel_values`` -> ``image_embeddings.0/.1/.2`` (``get_image_embeddings``)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values):  # noqa: D102
        return tuple(self.model.get_image_embeddings(pixel_values))


class TrackerDecoder(nn.Module):
    """Points, labels, boxes and the embeddings -> multimask IoU, logits, object score.

    ``input_boxes [1,B,4]`` with B = 0 means no box: transformers is then called with
    ``input_boxes=None`` (its prompt encoder appends SAM's padding point); with B >= 1 with the
    boxes (no padding point: a box carries its own). Both calls are traced and one is chosen by
    B, since a traced graph cannot branch (transformers' box path read uninitialised memory for
    B = 0 when traced with a box).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_points, input_labels, input_boxes, e0, e1, e2):  # noqa: D102
        emb = [e0, e1, e2]
        clicks = self.model(image_embeddings=emb, input_points=input_points,
                            input_labels=input_labels, multimask_output=True)
        boxed = self.model(image_embeddings=emb, input_points=input_points,
                           input_labels=input_labels, input_boxes=input_boxes,
                           multimask_output=True)
        has_box = torch.ones_like(input_boxes[..., 0]).sum() > 0
        return tuple(torch.where(has_box, b, c) for c, b in (
            (clicks.iou_scores, boxed.iou_scores), (clicks.pred_masks, boxed.pred_masks),
            (clicks.object_score_logits, boxed.object_score_logits)))


class DualVision(nn.Module):
    """One ViT pass, both necks (``Sam3VideoModel``): the detector's FPN and the tracker's.

    ``pixel_values`` -> ``fpn_hidden_state_0..3``, ``fpn_position_encoding_0..3`` (detector
    neck) and ``image_embeddings.0/.1/.2`` (tracker neck, ``conv_s0``/``conv_s1`` applied, the
    no-memory embedding added to level 2 as ``get_image_embeddings`` does).
    """

    def __init__(self, video: nn.Module) -> None:
        super().__init__()
        self.video = video

    def forward(self, pixel_values):  # noqa: D102
        vis = self.video.detector_model.vision_encoder(pixel_values)
        feats, _ = self.video.get_vision_features_for_tracker(vis)
        feats[-1] = feats[-1] + self.video.tracker_model.no_memory_embedding
        sizes = self.video.tracker_model.backbone_feature_sizes
        emb = [f.permute(1, 2, 0).reshape(1, -1, *size) for f, size in zip(feats, sizes,
                                                                           strict=True)]
        return (*vis.fpn_hidden_states, *vis.fpn_position_encoding, *emb)


class DetectorVision(nn.Module):
    """``pixel_values`` -> the four FPN levels and their position encodings."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values):  # noqa: D102
        out = self.model.get_vision_features(pixel_values)
        return (*out.fpn_hidden_states, *out.fpn_position_encoding)


class DetectorText(nn.Module):
    """``input_ids``, ``attention_mask`` -> ``text_features`` (projected to 256)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):  # noqa: D102
        return self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask,
                                            return_dict=True).pooler_output


class DetectorHead(nn.Module):
    """Three FPN levels, the top level's encoding and the text -> detections."""

    def __init__(self, model: nn.Module, presence: bool) -> None:
        super().__init__()
        self.model, self.presence = model, presence

    def forward(self, f0, f1, f2, pos2, text_features, attention_mask):  # noqa: D102
        out = self.model(vision_embeds=_vision(f0, f1, f2, pos2), attention_mask=attention_mask,
                         text_embeds=_text(text_features))
        heads = (out.pred_masks, out.pred_boxes, out.pred_logits)
        return (*heads, out.presence_logits) if self.presence else heads


class WwDetector(nn.Module):
    """The wW-Ww ``detector`` boundary: three FPN levels, text and its mask -> detections.

    ``features_{4g,2g,g}``, ``text_features [1,32,256]``, ``text_mask [1,32]`` bool (True =
    token: transformers' ``attention_mask.bool()``; the card does not give dtype or polarity)
    -> ``pred_logits [1,Q]``, ``pred_boxes [1,Q,4]``, ``presence_logits [1,1]``, ``pred_masks``,
    ``semantic_seg [1,1,4g,4g]``. The top level's sine position encoding does not depend on the
    image, so it is a constant of the graph here (not an input).
    """

    def __init__(self, model: nn.Module, pos2: torch.Tensor) -> None:
        super().__init__()
        self.head = DetectorHead(model, presence=True)
        self.register_buffer("pos2", pos2.clone(), persistent=True)

    def forward(self, f0, f1, f2, text_features, text_mask):  # noqa: D102
        out = self.head.model(
            vision_embeds=_vision(f0, f1, f2, self.pos2), attention_mask=text_mask.long(),
            text_embeds=_text(text_features))
        return (out.pred_logits, out.pred_boxes, out.presence_logits, out.pred_masks,
                out.semantic_seg)


def _vision(f0, f1, f2, pos2):
    from transformers.models.sam3.modeling_sam3 import Sam3VisionEncoderOutput

    zeros = torch.zeros_like(pos2)  # levels 0, 1 and 3's encodings are not read without boxes
    return Sam3VisionEncoderOutput(fpn_hidden_states=(f0, f1, f2, f2),
                                   fpn_position_encoding=(zeros, zeros, pos2, zeros))


def _text(text_features):
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    return BaseModelOutputWithPooling(pooler_output=text_features)


class WwVision(nn.Module):
    """:class:`DualVision` under the wW-Ww names: ``features_<side>`` and the tracker's three."""

    def __init__(self, video: nn.Module) -> None:
        super().__init__()
        self.dual = DualVision(video)

    def forward(self, pixel_values):  # noqa: D102
        out = self.dual(pixel_values)
        return (*out[:3], *out[8:])
