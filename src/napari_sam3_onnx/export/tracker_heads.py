"""SAM 3's tracker heads (Meta's code, random weights) exported in the ``jax-video`` layout.

The public ``jax-video`` decoder (``mask_decoder.onnx``: ``feats0..2``, ``input_points
[1,1,N,2]``, ``input_labels [1,1,N]`` int32 -> ``pred_masks``, ``high_res_masks``, ``iou_scores``,
``object_pointer``, ``object_score_logits``) was exported by ``torch.onnx`` from SAM's prompt
encoder and mask decoder. No exporter code for it is public; :class:`JaxVideoDecoder` wraps Meta's
own ``Sam3TrackerBase._build_sam_heads`` / ``_forward_sam_heads`` (upstream ``sam3==0.1.4``) at
that boundary, so the graph carries SAM's padding exactly as upstream traces it: a batch
``Gather`` of the ``[1,1,N,...]`` prompt, the +0.5 shift, then ``Concat`` with a constant zero
point and (after a ``Cast``) a constant label -1. It is a test fixture for the plugin's reading of
such graphs (the padding check, the adapter's click path), not a published export.

:func:`build_vision_stub` is a small random convolutional encoder with the layout's outputs, so a
whole bundle can be opened; its numbers mean nothing, the decoder's are Meta's arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

#: Added to the object-score logit (the head's last bias) so test prompts meet a present object.
OBJECT_SCORE_BIAS = 8.0
IMAGE_MEAN = (0.5, 0.5, 0.5)
IMAGE_STD = (0.5, 0.5, 0.5)
DECODER_OUTPUTS = ("pred_masks", "high_res_masks", "iou_scores", "object_pointer",
                   "object_score_logits")


class JaxVideoDecoder(nn.Module):
    """Meta's SAM heads for one image: the multimask path of ``_forward_sam_heads``.

    ``grid`` is the top level's side (72 in SAM 3; smaller here so the test is fast);
    ``image_size = 14 * grid`` (SAM 3's backbone stride). Channels are SAM 3's (256, and 32 / 64
    for the two high-resolution levels).
    """

    def __init__(self, grid: int = 16, hidden_dim: int = 256) -> None:
        super().__init__()
        from sam3.model.sam3_tracker_base import Sam3TrackerBase

        self._base = Sam3TrackerBase
        self.hidden_dim, self.mem_dim = hidden_dim, 64
        self.backbone_stride, self.image_size = 14, 14 * grid
        self.sam_mask_decoder_extra_args = None
        self.compile_all_components = False
        self.teacher_force_obj_scores_for_mem = False
        Sam3TrackerBase._build_sam_heads(self)
        self.no_obj_ptr = nn.Parameter(torch.randn(1, hidden_dim) * 0.02)
        with torch.no_grad():  # random heads say "absent" half the time; SAM then blanks masks
            self.sam_mask_decoder.pred_obj_score_head.layers[-1].bias.fill_(OBJECT_SCORE_BIAS)

    def _maybe_clone(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def heads(self, feats0, feats1, feats2, coords, labels):
        """Upstream ``_forward_sam_heads`` on ``[B,N,2]`` points (multimask)."""
        return self._base._forward_sam_heads(
            self, feats2, point_inputs={"point_coords": coords, "point_labels": labels},
            high_res_features=[feats0, feats1], multimask_output=True)

    def forward(self, feats0, feats1, feats2, input_points, input_labels):  # noqa: D102
        low, high, iou, _, _, ptr, obj = self.heads(
            feats0, feats1, feats2, input_points[:, 0], input_labels[:, 0])
        return low[:, None], high[:, None], iou[:, None], ptr[:, None], obj[:, None]


class VisionStub(nn.Module):
    """``pixel_values [1,3,S,S]`` -> ``feats0..2`` and ``pos0..2`` (random convolutions)."""

    def __init__(self, grid: int = 16, hidden_dim: int = 256) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, hidden_dim, kernel_size=14, stride=14)
        self.up1 = nn.ConvTranspose2d(hidden_dim, hidden_dim // 4, 2, stride=2)
        self.up0 = nn.ConvTranspose2d(hidden_dim // 4, hidden_dim // 8, 2, stride=2)
        self.pos = nn.ParameterList(nn.Parameter(torch.randn(1, hidden_dim, grid * k, grid * k))
                                    for k in (4, 2, 1))

    def forward(self, pixel_values):  # noqa: D102
        f2 = self.patch(pixel_values)
        f1 = self.up1(f2)
        f0 = self.up0(f1)
        return f0, f1, f2, self.pos[0] * 1.0, self.pos[1] * 1.0, self.pos[2] * 1.0


def declare_output_shapes(path: Path, shapes: dict[str, list[int]]) -> None:
    """Declare fixed output shapes (TorchScript's exporter leaves some dims symbolic).

    The published layout declares them (``pred_masks [1,1,3,L,L]`` and so on); the adapter
    reads the geometry from them. Only dims that do not depend on the prompt are given.
    """
    import onnx

    model = onnx.load(str(path))
    for out in model.graph.output:
        if out.name in shapes:
            dims = out.type.tensor_type.shape.dim
            del dims[:]
            for size in shapes[out.name]:
                dims.add().dim_value = int(size)
    onnx.save(model, str(path))


def export_jax_video_bundle(folder: Path, seed: int = 0, grid: int = 16,
                            dynamo: bool = True) -> tuple[Path, JaxVideoDecoder, VisionStub]:
    """Write ``vision_encoder.onnx``, ``mask_decoder.onnx`` and ``constants.json`` to ``folder``.

    Returns the folder and the two modules (eval mode) for PyTorch references. ``dynamo``
    chooses ``torch.onnx.export``'s exporter (its default since torch 2.9, or TorchScript).
    ``constants.json`` has no ``no_mem_embed``: the adapter then adds nothing to ``feats2``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    dec, enc = JaxVideoDecoder(grid).eval(), VisionStub(grid).eval()
    s = 14 * grid
    feats = tuple(t.detach() for t in enc(torch.zeros(1, 3, s, s)))[:3]
    pts = torch.tensor([[[[10.0, 20.0], [30.0, 40.0]]]])
    labs = torch.tensor([[[1, 0]]], dtype=torch.int32)
    n = torch.export.Dim("num_points", min=1, max=64) if dynamo else None
    kwargs: dict = ({"dynamic_shapes": {"feats0": None, "feats1": None, "feats2": None,
                                        "input_points": {2: n}, "input_labels": {2: n}}}
                    if dynamo else {"dynamic_axes": {"input_points": {2: "num_points"},
                                                     "input_labels": {2: "num_points"}}})
    with torch.no_grad():
        torch.onnx.export(dec, (*feats, pts, labs), str(folder / "mask_decoder.onnx"),
                          input_names=["feats0", "feats1", "feats2", "input_points",
                                       "input_labels"],
                          output_names=list(DECODER_OUTPUTS), dynamo=dynamo,
                          external_data=False, **kwargs)
        torch.onnx.export(enc, (torch.zeros(1, 3, s, s),), str(folder / "vision_encoder.onnx"),
                          input_names=["pixel_values"],
                          output_names=["feats0", "feats1", "feats2", "pos0", "pos1", "pos2"],
                          dynamo=dynamo, external_data=False)
    with torch.no_grad():
        shapes = {n: list(t.shape) for n, t in zip(DECODER_OUTPUTS, dec(*feats, pts, labs),
                                                    strict=True)}
    declare_output_shapes(folder / "mask_decoder.onnx", shapes)
    (folder / "constants.json").write_text(json.dumps(
        {"image_mean": list(IMAGE_MEAN), "image_std": list(IMAGE_STD)}))
    return folder, dec, enc
