"""Small random-weight ``transformers`` SAM 3 models exported under the published HF names.

Test fixtures for the plugin's adapters on real architecture (issue 23): the graphs are
``transformers``' own ``Sam3TrackerModel`` / ``Sam3Model`` code at reduced width and depth (and a
224-pixel input, a 16 x 16 top level), exported by ``torch.onnx`` (TorchScript) with the tensor
names the public exports use:

* ``hf-tracker`` (onnx-community ``sam3-tracker-ONNX``): ``vision_encoder.onnx`` ``pixel_values
  [1,3,S,S]`` -> ``image_embeddings.0/.1/.2`` (``get_image_embeddings``: levels 0 and 1 through
  the mask decoder's ``conv_s0``/``conv_s1``, the learned no-memory embedding added to level
  2); ``prompt_encoder_mask_decoder.onnx`` ``input_points [1,1,N,2]`` float, ``input_labels
  [1,1,N]`` int64, ``input_boxes [1,B,4]`` float (xyxy, model pixels) and the three embeddings
  -> ``iou_scores [1,1,3]``, ``pred_masks [1,1,3,4g,4g]`` logits, ``object_score_logits
  [1,1,1]``;
* ``hf-detector`` (``danilobukvic/sam3-text-onnx``, transformers.js): ``vision_encoder.onnx``
  ``pixel_values`` -> ``fpn_hidden_state_0..3`` and ``fpn_position_encoding_0..3``;
  ``text_encoder.onnx`` ``input_ids [1,32]`` int64, ``attention_mask [1,32]`` int64 ->
  ``text_features [1,32,256]``; ``decoder.onnx`` ``fpn_hidden_state_0..2``,
  ``fpn_position_encoding_2``, ``text_features``, ``attention_mask`` -> ``pred_masks [1,Q,4g,4g]``
  logits, ``pred_boxes [1,Q,4]`` normalised xyxy, ``pred_logits [1,Q]`` (and, only with
  ``presence=True``, ``presence_logits [1,1]``: the published graph has none).

Pixels: stretched to ``S x S``, ``(x / 255 - 0.5) / 0.5`` (HF's SAM 3 processor). Nothing here is
a published export; the numbers are random, the arithmetic is transformers'.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from .hf_modules import (
    DetectorHead,
    DetectorText,
    DetectorVision,
    DualVision,
    TrackerDecoder,
    TrackerVision,
    WwDetector,
    WwVision,
)

SIZE = 224
GRID = SIZE // 14
QUERIES = 20
CONTEXT = 32
#: Added to the tracker's object-score logit (the last bias of its head) so that test prompts
#: meet a present object and produce masks to compare.
OBJECT_SCORE_BIAS = 8.0
EMBEDDINGS = ("image_embeddings.0", "image_embeddings.1", "image_embeddings.2")
FPN = tuple(f"fpn_hidden_state_{i}" for i in range(4))
FPN_POS = tuple(f"fpn_position_encoding_{i}" for i in range(4))


def vision_config() -> dict:
    """A 2-layer, 64-wide ViT at 224 px feeding SAM 3's 256-channel FPN neck."""
    vit = {"model_type": "sam3_vit_model", "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": SIZE,
           "window_size": 8, "global_attn_indexes": [1], "pretrain_image_size": SIZE}
    return {"backbone_config": vit, "fpn_hidden_size": 256,
            "backbone_feature_sizes": [[4 * GRID] * 2, [2 * GRID] * 2, [GRID] * 2]}


def _tracker_kwargs() -> dict:
    return {"vision_config": vision_config(), "prompt_encoder_config": {"image_size": SIZE},
            "mask_decoder_config": {"mlp_dim": 256, "iou_head_hidden_dim": 64}}


def _detector_kwargs() -> dict:
    text = {"vocab_size": 49408, "hidden_size": 64, "intermediate_size": 128,
            "projection_dim": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
            "max_position_embeddings": CONTEXT}
    small = {"num_layers": 1, "intermediate_size": 256}
    return {"vision_config": vision_config(), "text_config": text,
            "geometry_encoder_config": small, "detr_encoder_config": small,
            "detr_decoder_config": {**small, "num_queries": QUERIES}}


def _tune_tracker(tracker: nn.Module) -> None:
    with torch.no_grad():
        tracker.no_memory_embedding.normal_(0.0, 0.5)  # zeros would hide where it is added
        # random heads say "object absent" half the time, and SAM 3 then empties the mask
        tracker.mask_decoder.pred_obj_score_head.proj_out.bias.fill_(OBJECT_SCORE_BIAS)


def build_tracker(seed: int = 0) -> nn.Module:
    """``Sam3TrackerModel`` (eval) with random weights; SAM 3's head at a small input."""
    from transformers import Sam3TrackerConfig, Sam3TrackerModel

    torch.manual_seed(seed)
    model = Sam3TrackerModel(Sam3TrackerConfig(**_tracker_kwargs())).eval()
    _tune_tracker(model)
    return model


def build_detector(seed: int = 0) -> nn.Module:
    """``Sam3Model`` (eval) with random weights: 1-layer DETR, 20 queries, a 2-layer CLIP."""
    from transformers import Sam3Config, Sam3Model

    torch.manual_seed(seed)
    return Sam3Model(Sam3Config(**_detector_kwargs())).eval()


def build_video(seed: int = 0) -> nn.Module:
    """``Sam3VideoModel`` (eval): the detector above, a tracker, and the tracker neck on one ViT."""
    from transformers import Sam3VideoConfig, Sam3VideoModel

    tracker = {"model_type": "sam3_tracker_video", **_tracker_kwargs(), "image_size": SIZE,
               "memory_attention_num_layers": 1, "memory_attention_feed_forward_hidden_size": 256,
               "memory_attention_rope_feat_sizes": [GRID, GRID]}
    cfg = Sam3VideoConfig(detector_config={"model_type": "sam3", **_detector_kwargs()},
                          tracker_config=tracker, low_res_mask_size=4 * GRID)
    torch.manual_seed(seed)
    video = Sam3VideoModel(cfg).eval()
    _tune_tracker(video.tracker_model)
    return video


def tracker_of(video: nn.Module) -> nn.Module:
    """A ``Sam3TrackerModel`` holding ``video``'s tracker head (as both load one checkpoint).

    Its own vision encoder stays random and unused: the video model's ViT and tracker neck
    produce the embeddings (:class:`DualVision`).
    """
    from transformers import Sam3TrackerConfig, Sam3TrackerModel

    model = Sam3TrackerModel(Sam3TrackerConfig(**_tracker_kwargs())).eval()
    result = model.load_state_dict(video.tracker_model.state_dict(), strict=False)
    head = ("prompt_encoder.", "mask_decoder.", "shared_image_embedding.", "no_memory_embedding")
    missing = [k for k in result.missing_keys if k.startswith(head)]
    if missing:
        raise RuntimeError(f"tracker head weights not shared: {missing[:5]}")
    return model


def _export(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
            dynamic: dict | None = None) -> None:
    module.eval()  # the exporter restores the wrapper's mode, and a new module is in training
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic or {}, dynamo=False, opset_version=17)
        declared = module(*args)
    if isinstance(declared, torch.Tensor):
        declared = (declared,)
    _declare_shapes(path, dict(zip(outputs, declared, strict=True)), dynamic or {})


def _declare_shapes(path: Path, tensors: dict, dynamic: dict) -> None:
    """Fixed output shapes where the exporter left them symbolic (the published graphs fix them).

    Axes named in ``dynamic`` stay symbolic.
    """
    import onnx

    model = onnx.load(str(path))
    for out in model.graph.output:
        dims = out.type.tensor_type.shape.dim
        shape = list(tensors[out.name].shape)
        keep = dynamic.get(out.name, {})
        del dims[:]
        for axis, size in enumerate(shape):
            if axis in keep:
                dims.add().dim_param = keep[axis]
            else:
                dims.add().dim_value = int(size)
    onnx.save(model, str(path))


def pixels(rgb_resized: torch.Tensor) -> torch.Tensor:
    """``(S, S, 3)`` uint8 -> ``[1,3,S,S]`` float32, ``(x / 255 - 0.5) / 0.5``."""
    x = rgb_resized.float().permute(2, 0, 1)[None] / 255.0
    return (x - 0.5) / 0.5


def export_tracker(folder: Path, model: nn.Module) -> Path:
    """The onnx-community tracker pair in ``folder`` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x = torch.zeros(1, 3, SIZE, SIZE)
    _export(TrackerVision(model), (x,), folder / "vision_encoder.onnx", ["pixel_values"],
            list(EMBEDDINGS))
    with torch.no_grad():
        emb = model.get_image_embeddings(x)
    _export_tracker_decoder(folder, model, emb)
    return folder


def _export_tracker_decoder(folder: Path, model: nn.Module, emb) -> None:
    pts = torch.tensor([[[[30.0, 40.0], [100.0, 90.0]]]])
    labs = torch.tensor([[[1, 0]]], dtype=torch.int64)
    boxes = torch.tensor([[[20.0, 30.0, 150.0, 120.0]]])
    _export(TrackerDecoder(model), (pts, labs, boxes, *emb),
            folder / "prompt_encoder_mask_decoder.onnx",
            ["input_points", "input_labels", "input_boxes", *EMBEDDINGS],
            ["iou_scores", "pred_masks", "object_score_logits"],
            {"input_points": {2: "num_points"}, "input_labels": {2: "num_points"},
             "input_boxes": {1: "num_boxes"}})


def export_detector(folder: Path, model: nn.Module, presence: bool = False) -> Path:
    """The danilobukvic / transformers.js text-detector triple in ``folder`` (created)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x = torch.zeros(1, 3, SIZE, SIZE)
    _export(DetectorVision(model), (x,), folder / "vision_encoder.onnx", ["pixel_values"],
            [*FPN, *FPN_POS])
    _export_detector_heads(folder, model, presence)
    return folder


def export_dual(folder: Path, video: nn.Module) -> Path:
    """A one-encoder folder: parodiniccolo's dual encoder + onnx-community's + danilobukvic's heads.

    ``sam3_vision_dual.onnx`` (:class:`DualVision`), ``prompt_encoder_mask_decoder.onnx`` (the
    tracker head, :func:`tracker_of`), ``text_encoder.onnx`` and ``decoder.onnx`` (the
    detector's).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x = torch.zeros(1, 3, SIZE, SIZE)
    dual = DualVision(video)
    _export(dual, (x,), folder / "sam3_vision_dual.onnx", ["pixel_values"],
            [*FPN, *FPN_POS, *EMBEDDINGS])
    with torch.no_grad():
        emb = list(dual(x)[8:])
    _export_tracker_decoder(folder, tracker_of(video), emb)
    _export_detector_heads(folder, video.detector_model, False)
    return folder


def ww_feature_names() -> tuple[str, str, str]:
    """``features_<side>`` of the three detector levels (``features_288/144/72`` at 1008 px)."""
    return tuple(f"features_{k * GRID}" for k in (4, 2, 1))  # type: ignore[return-value]


def export_wwww(folder: Path, video: nn.Module, dual: Path | None = None) -> Path:
    """The ``wW-Ww/sam3-ONNX`` arrangement under its card's names (fp32 here, not fp16).

    ``vision.onnx`` (``pixel_values`` -> ``features_*`` + ``image_embeddings.0/.1/.2``, one ViT
    pass), ``prompt_encoder_mask_decoder.onnx`` (as onnx-community's), ``text.onnx``
    (``input_ids``, ``attention_mask`` -> ``text_features``) and ``detector.onnx``
    (:class:`WwDetector`, with ``presence_logits``). ``dual``: a folder :func:`export_dual`
    wrote from the same ``video``; its graphs are then renamed and copied, not exported again.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    x = torch.zeros(1, 3, SIZE, SIZE)
    feats = ww_feature_names()
    with torch.no_grad():
        out = DualVision(video).eval()(x)
    model = video.detector_model
    ids, mask = tokens([49406, 320, 1929, 49407])
    if dual is None:
        _export(WwVision(video), (x,), folder / "vision.onnx", ["pixel_values"],
                [*feats, *EMBEDDINGS])
        _export_tracker_decoder(folder, tracker_of(video), list(out[8:]))
        _export(DetectorText(model), (ids, mask), folder / "text.onnx",
                ["input_ids", "attention_mask"], ["text_features"])
    else:
        _renamed(Path(dual) / "sam3_vision_dual.onnx", folder / "vision.onnx",
                 dict(zip(FPN[:3], feats, strict=True)), [*feats, *EMBEDDINGS])
        for src, dst in (("prompt_encoder_mask_decoder.onnx", "prompt_encoder_mask_decoder.onnx"),
                         ("text_encoder.onnx", "text.onnx")):
            _renamed(Path(dual) / src, folder / dst, {}, None)
    with torch.no_grad():
        text = DetectorText(model)(ids, mask)
    _export(WwDetector(model, out[6]), (*out[:3], text, mask.bool()), folder / "detector.onnx",
            [*feats, "text_features", "text_mask"],
            ["pred_logits", "pred_boxes", "presence_logits", "pred_masks", "semantic_seg"])
    return folder


def _renamed(src: Path, dst: Path, rename: dict[str, str], keep: list[str] | None) -> None:
    """Copy a graph, renaming tensors and keeping only the outputs ``keep`` (None: all)."""
    import onnx

    model = onnx.load(str(src))
    for node in model.graph.node:
        node.input[:] = [rename.get(i, i) for i in node.input]
        node.output[:] = [rename.get(o, o) for o in node.output]
    outputs = list(model.graph.output)
    for out in outputs:
        out.name = rename.get(out.name, out.name)
    if keep is not None:
        del model.graph.output[:]
        model.graph.output.extend(sorted((o for o in outputs if o.name in keep),
                                         key=lambda o: keep.index(o.name)))
    onnx.save(model, str(dst))


def _export_detector_heads(folder: Path, model: nn.Module, presence: bool) -> None:
    x = torch.zeros(1, 3, SIZE, SIZE)
    ids, mask = tokens([49406, 320, 1929, 49407])
    _export(DetectorText(model), (ids, mask), folder / "text_encoder.onnx",
            ["input_ids", "attention_mask"], ["text_features"])
    with torch.no_grad():
        vis = model.get_vision_features(x)
        text = DetectorText(model)(ids, mask)
    outs = ["pred_masks", "pred_boxes", "pred_logits", *(["presence_logits"] if presence else [])]
    _export(DetectorHead(model, presence),
            (*vis.fpn_hidden_states[:3], vis.fpn_position_encoding[2], text, mask),
            folder / "decoder.onnx",
            [*FPN[:3], FPN_POS[2], "text_features", "attention_mask"], outs)


def tokens(ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` padded with the end token to 32 and ``attention_mask`` (1 = token)."""
    padded = torch.full((1, CONTEXT), 49407, dtype=torch.int64)
    padded[0, :len(ids)] = torch.tensor(ids)
    mask = torch.zeros(1, CONTEXT, dtype=torch.int64)
    mask[0, :len(ids)] = 1
    return padded, mask


def signatures(folder: Path) -> list[str]:
    """``graph: name dtype shape`` lines of every graph in ``folder`` (for the record)."""
    import onnx

    lines = []
    kind: Callable[[int], str] = lambda t: onnx.helper.tensor_dtype_to_np_dtype(t).name  # noqa: E731
    for path in sorted(Path(folder).glob("*.onnx")):
        g = onnx.load(str(path), load_external_data=False).graph
        for side, values in (("in", g.input), ("out", g.output)):
            for v in values:
                t = v.type.tensor_type
                dims = [d.dim_param or d.dim_value for d in t.shape.dim]
                lines.append(f"{path.name} {side} {v.name} {kind(t.elem_type)} {dims}")
    return lines
