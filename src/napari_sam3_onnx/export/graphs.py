"""The ``torch.nn.Module`` wrappers exported as the ``nso-sam3`` graphs.

Each wrapper calls Meta's own sub-modules (their weights, their arithmetic); what is ours is the
graph boundary and a few re-writings needed to export, each explained where it is done:

* **complex RoPE in real arithmetic** (ViT attention, memory attention): upstream multiplies
  ``view_as_complex`` tensors by a complex ``freqs_cis`` buffer; ONNX has no complex type, so the
  same product ``(a + ib)(c + is) = (ac - bs) + i(as + bc)`` is written with the buffer's real and
  imaginary parts as float constants;
* **memory attention keys**: upstream rotates the first ``num_k - num_obj_ptr_tokens`` keys in
  place, repeating ``freqs_cis`` once per memory; here spatial memories and object pointers are
  separate inputs with dynamic lengths, the spatial keys are rotated per memory by broadcasting,
  the pointer keys are not rotated, and the two are concatenated (same keys, same order);
* **zero-length prompt concat**: the detector never gets point prompts, so the geometry
  encoder's point branch (which would run ``grid_sample`` on an empty grid) is replaced by its
  result, an empty sequence; the box slots always hold >= 1 row, unused rows are *masked*
  (``exemplar_padding = True``), never a whole-image positive box (that would be an exemplar);
* **memory-encoder mask resize**: upstream resizes 1008 -> 1152 with ``antialias=True``; for an
  enlargement the antialiased triangle filter equals plain bilinear (``align_corners=False``),
  which ONNX ``Resize`` expresses;
* position encodings (sine, image-independent) and the RoPE tables are computed once here and
  registered as *persistent* buffers, so each is one shared initializer in the graph (a
  non-persistent buffer is inlined as a constant at every use: 30 copies of the RoPE table).
"""

from __future__ import annotations

import math
import types

import torch
import torch.nn.functional as F
from torch import nn

from .attention import attend
from .shared_image import predict_masks_shared_image

SCALP_LEVELS = 3  # the VL backbone drops the 4th (36 x 36) level (scalp=1)


# ---- RoPE in real arithmetic ---------------------------------------------------------------
def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Complex multiply ``x`` (pairs along the last axis) by ``cos + i sin``."""
    xf = x.float().reshape(*x.shape[:-1], -1, 2)
    a, b = xf[..., 0], xf[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2).type_as(x)


def _vit_apply_rope(self, q: torch.Tensor, k: torch.Tensor):
    if not self.use_rope:
        return q, k
    return _rotate(q, self.rope_cos, self.rope_sin), _rotate(k, self.rope_cos, self.rope_sin)


def real_rope_vit(trunk: nn.Module) -> None:
    """Give every ViT attention with RoPE a real-arithmetic ``_apply_rope`` (same values)."""
    for mod in trunk.modules():
        freqs = getattr(mod, "freqs_cis", None)
        if freqs is None or not torch.is_complex(freqs) or not hasattr(mod, "_apply_rope"):
            continue
        mod.register_buffer("rope_cos", freqs.real.float().contiguous(), persistent=True)
        mod.register_buffer("rope_sin", freqs.imag.float().contiguous(), persistent=True)
        mod._apply_rope = types.MethodType(_vit_apply_rope, mod)


# ---- image encoder ------------------------------------------------------------------------
class ImageEncoder(nn.Module):
    """One ViT pass, both necks: detector FPN (256 ch x 3 levels) and tracker features.

    ``pixel_values [1,3,S,S]`` (x/255, then (x - 0.5)/0.5) -> ``det_fpn_0..2`` (288/144/72, 256 ch),
    ``trk_feat_0 [1,32,288,288]`` (``conv_s0`` applied), ``trk_feat_1 [1,64,144,144]``
    (``conv_s1``), ``trk_feat_2 [1,256,72,72]`` (the raw top-level tracker feature ``F``).
    """

    outputs = ("det_fpn_0", "det_fpn_1", "det_fpn_2", "trk_feat_0", "trk_feat_1", "trk_feat_2")

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        neck = model.backbone.vision_backbone
        tracker = model.inst_interactive_predictor.model
        self.trunk = neck.trunk
        self.convs = nn.ModuleList(list(neck.convs)[:SCALP_LEVELS])
        self.sam2_convs = nn.ModuleList(list(neck.sam2_convs)[:SCALP_LEVELS])
        self.conv_s0 = tracker.sam_mask_decoder.conv_s0
        self.conv_s1 = tracker.sam_mask_decoder.conv_s1
        real_rope_vit(self.trunk)

    def forward(self, pixel_values: torch.Tensor):  # noqa: D102
        x = self.trunk(pixel_values)[-1]
        det = [conv(x) for conv in self.convs]
        trk = [conv(x) for conv in self.sam2_convs]
        return (*det, self.conv_s0(trk[0]), self.conv_s1(trk[1]), trk[2])


# ---- language encoder ---------------------------------------------------------------------
class LanguageEncoder(nn.Module):
    """``tokens [1,T]`` int64 (0-padded CLIP ids) -> ``text_features [T,1,256]``, ``text_mask``.

    ``text_mask [1,T]`` bool is True at padding (upstream: ``(tokens != 0).ne(1)``).
    """

    outputs = ("text_features", "text_mask")

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        lang = model.backbone.language_backbone
        self.encoder = lang.encoder
        self.resizer = lang.resizer

    def forward(self, tokens: torch.Tensor):  # noqa: D102
        _, memory = self.encoder(tokens)
        return self.resizer(memory.transpose(0, 1)), tokens == 0


# ---- concept detector ---------------------------------------------------------------------
def _no_points(self, points, points_mask, points_labels, img_feats):
    """The geometry encoder's point branch with no points: its (empty) result."""
    n, bs = points.shape[:2]
    return points.new_zeros((n, bs, self.d_model)), points_mask


def _concat_after_empty(original):
    """``concat_padded_sequences`` that returns ``seq2`` itself when ``seq1`` is empty.

    With an empty first sequence upstream's result *is* the (right-padded) second one; writing
    it so keeps a zero-size ``index_put`` out of the traced graph.
    """

    def concat(seq1, mask1, seq2, mask2, return_index: bool = False):
        if seq1.shape[0] == 0 and not return_index:
            return seq2, mask2
        return original(seq1, mask1, seq2, mask2, return_index=return_index)

    concat.is_nso_patch = True
    return concat


class ConceptDetector(nn.Module):
    """Text + exemplar boxes -> SAM 3's raw detector heads (200 queries).

    Inputs: ``det_fpn_0..2``, ``text_features [T,1,256]``, ``text_mask [1,T]`` (True = pad),
    ``exemplar_boxes [K,1,4]`` cx, cy, w, h normalised, ``exemplar_labels [K,1]`` int64
    (1 = positive),
    ``exemplar_padding [1,K]`` bool (True = unused slot); K fixed at export (16).
    Outputs: ``pred_logits [1,Q,1]``, ``pred_boxes [1,Q,4]`` (cxcywh normalised),
    ``pred_masks [1,Q,288,288]`` logits, ``presence_logit [1,1]``.
    """

    outputs = ("pred_logits", "pred_boxes", "pred_masks", "presence_logit")

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        import sam3.model.geometry_encoders as ge
        from sam3.model.data_misc import FindStage

        self.model = model
        if not getattr(ge.concat_padded_sequences, "is_nso_patch", False):
            ge.concat_padded_sequences = _concat_after_empty(ge.concat_padded_sequences)
        model.geometry_encoder._encode_points = types.MethodType(_no_points,
                                                                 model.geometry_encoder)
        pe = model.backbone.vision_backbone.position_encoding
        sizes = [(288, 288), (144, 144), (72, 72)]
        for i, (h, w) in enumerate(sizes):
            pos = pe(torch.zeros(1, 256, h, w)).float()
            self.register_buffer(f"pos_{i}", pos.clone(), persistent=True)
        ids = torch.zeros(1, dtype=torch.long)
        self.find_stage = FindStage(img_ids=ids, text_ids=ids, input_boxes=None,
                                    input_boxes_mask=None, input_boxes_label=None,
                                    input_points=None, input_points_mask=None)

    def forward(self, f0, f1, f2, text_features, text_mask, boxes, labels, padding):  # noqa: D102
        from sam3.model.geometry_encoders import Prompt

        backbone_out = {
            "backbone_fpn": [f0, f1, f2],
            "vision_pos_enc": [self.pos_0, self.pos_1, self.pos_2],
            "language_features": text_features,
            "language_mask": text_mask,
        }
        prompt = Prompt(box_embeddings=boxes, box_mask=padding, box_labels=labels)
        out = self.model.forward_grounding(backbone_out=backbone_out, find_input=self.find_stage,
                                           find_target=None, geometric_prompt=prompt)
        return (out["pred_logits"], out["pred_boxes"], out["pred_masks"],
                out["presence_logit_dec"])


# ---- prompt (click / box) decoder ---------------------------------------------------------
class PromptDecoder(nn.Module):
    """SAM head: 4 masks (token 0 single-mask, 1-3 multimask), IoU, object score and pointers.

    Inputs: ``image_embed [1,256,72,72]`` (``F + no_mem_embed`` on a prompted slice, or the
    memory-conditioned feature), ``trk_feat_0``, ``trk_feat_1``, ``point_coords [B,N,2]``
    (model-input pixels; a box = labels 2, 3 first), ``point_labels [B,N]`` int32
    (1, 0, 2, 3, -1 = padding), ``mask_input [1,1,288,288]`` logits, ``has_mask_input [1]``
    (1.0: use it; 0.0: SAM's learned no-mask embedding). The prompt encoder appends its own
    padding point, as upstream does with ``boxes=None``. ``B`` objects share one image and
    one mask prompt (automatic segmentation sends a batch of single clicks; B = 1 otherwise).
    Outputs: ``masks [B,4,288,288]`` logits (not occlusion-gated), ``iou_scores [B,4]``,
    ``object_score_logits [B,1]``, ``object_pointers [B,4,256]``: ``obj_ptr_proj`` of each
    mask token, replaced by ``no_obj_ptr`` when the object score is <= 0 (upstream's gating).
    """

    outputs = ("masks", "iou_scores", "object_score_logits", "object_pointers")

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        tracker = model.inst_interactive_predictor.model
        self.prompt_encoder = tracker.sam_prompt_encoder
        self.mask_decoder = tracker.sam_mask_decoder
        self.obj_ptr_proj = tracker.obj_ptr_proj
        self.no_obj_ptr = tracker.no_obj_ptr
        self.register_buffer("image_pe", self.prompt_encoder.get_dense_pe().clone(),
                             persistent=True)

    def forward(self, image_embed, trk_feat_0, trk_feat_1, point_coords,  # noqa: D102
                point_labels, mask_input, has_mask_input):
        sparse, no_mask = self.prompt_encoder(points=(point_coords, point_labels), boxes=None,
                                              masks=None)
        with_mask = self.prompt_encoder.mask_downscaling(mask_input)
        # one image, one mask prompt: the dense prompt is the same for every object
        dense = torch.where(has_mask_input.reshape(1, 1, 1, 1) > 0.5, with_mask, no_mask[:1])
        masks, iou, tokens, obj = predict_masks_shared_image(
            self.mask_decoder, image_embed, self.image_pe, sparse, dense,
            [trk_feat_0, trk_feat_1])  # upstream's repeat_image=True, image work done once
        ptr = self.obj_ptr_proj(tokens)
        present = (obj > 0).float()[:, :, None]
        ptr = present * ptr + (1 - present) * self.no_obj_ptr
        return masks, iou, obj, ptr


# ---- memory encoder -----------------------------------------------------------------------
class MemoryEncoder(nn.Module):
    """One slice's memory: ``memory_feat [1,64,72,72]`` from ``F`` and the chosen mask.

    Inputs: ``trk_feat_2 [1,256,72,72]`` (raw ``F``), ``mask_logits [1,1,288,288]`` (low-res
    logits; upsampled bilinearly to 1008 here, as upstream does), ``object_score_logits [1,1]``
    (<= 0 adds ``no_obj_embed_spatial``), ``is_mask_from_points [1]`` bool (True: binarise at 0,
    prompted slices; False: sigmoid, tracked slices); then ``x 20 - 10``.
    The memory's positional encoding is image-independent: ``maskmem_pos_enc`` in the constants.
    """

    outputs = ("memory_feat",)

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        tracker = model.inst_interactive_predictor.model
        self.image_size = tracker.image_size
        self.mem = tracker.maskmem_backbone
        self.scale = float(tracker.sigmoid_scale_for_mem_enc)
        self.bias = float(tracker.sigmoid_bias_for_mem_enc)
        self.no_obj_embed_spatial = tracker.no_obj_embed_spatial
        self.interpol_size = list(self.mem.mask_downsampler.interpol_size or [])

    def forward(self, trk_feat_2, mask_logits, object_score_logits, is_mask_from_points):  # noqa: D102
        high = F.interpolate(mask_logits, size=(self.image_size, self.image_size),
                             mode="bilinear", align_corners=False)
        flag = is_mask_from_points.reshape(1, 1, 1, 1)
        mask = torch.where(flag, (high > 0).float(), torch.sigmoid(high))
        mask = mask * self.scale + self.bias
        if self.interpol_size and self.interpol_size != list(mask.shape[-2:]):
            mask = F.interpolate(mask, size=self.interpol_size, mode="bilinear",
                                 align_corners=False)
        down = self.mem.mask_downsampler.encoder(mask)
        x = self.mem.pix_feat_proj(trk_feat_2) + down
        x = self.mem.out_proj(self.mem.fuser(x))
        absent = 1 - (object_score_logits > 0).float()
        return x + absent[..., None, None] * self.no_obj_embed_spatial[..., None, None]


# ---- memory attention ---------------------------------------------------------------------
def sine_pe(pos: torch.Tensor, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Upstream's ``get_1d_sine_pe``: ``[sin(p / w_i), cos(p / w_i)]``.

    ``w_i = T ** (2 * (i // 2) / (d / 2))`` for ``i < d / 2``.
    """
    half = dim // 2
    dim_t = torch.arange(half, dtype=torch.float32)
    dim_t = temperature ** (2 * (dim_t // 2) / half)
    x = pos[:, None] / dim_t
    return torch.cat([x.sin(), x.cos()], dim=-1)


class MemoryAttention(nn.Module):
    """Condition ``F`` on spatial memories and object pointers (dynamic counts M >= 1, P >= 0).

    Inputs: ``trk_feat_2 [1,256,72,72]`` (raw ``F``), ``memory_feats [M,64,72,72]``,
    ``memory_rows [M]`` int64 (row of ``maskmem_tpos_enc``: 6 = prompted slice, 0 = previous
    slice), ``pointers [P,256]``, ``pointer_tpos [P]`` (slice distance / (max_obj_ptrs - 1)).
    Output ``conditioned_feat [1,256,72,72]``: decode it with the prompt decoder.
    """

    outputs = ("conditioned_feat",)
    #: Trace attention as the fused contrib operator (set by ``attention.fused_attention``).
    fused_attention = False

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        tracker = model.inst_interactive_predictor.model
        self.encoder = tracker.transformer.encoder
        self.tpos_proj = tracker.obj_ptr_tpos_proj
        self.hidden = tracker.hidden_dim
        self.mem_dim = tracker.mem_dim
        pe = model.backbone.vision_backbone.position_encoding
        pos = pe(torch.zeros(1, 256, 72, 72)).float()  # tracker neck: same sine encoding
        self.register_buffer("pos", pos.flatten(2).permute(0, 2, 1).contiguous(),
                             persistent=True)
        mpos = tracker.maskmem_backbone.position_encoding(torch.zeros(1, 64, 72, 72)).float()
        self.register_buffer("mem_pos", mpos.flatten(2).permute(0, 2, 1).contiguous(),
                             persistent=True)
        self.register_buffer("tpos_table", tracker.maskmem_tpos_enc.detach().reshape(
            tracker.num_maskmem, -1).clone(), persistent=True)
        freqs = self.encoder.layers[0].self_attn.freqs_cis
        self.register_buffer("cos", freqs.real.float().contiguous(), persistent=True)
        self.register_buffer("sin", freqs.imag.float().contiguous(), persistent=True)

    @staticmethod
    def _heads(x: torch.Tensor, n: int) -> torch.Tensor:
        # Constant head sizes and a -1 token count: a reshape ONNX can do with 0 tokens (P = 0).
        return x.reshape(1, -1, n, int(x.shape[-1]) // n).transpose(1, 2)

    def _self_attn(self, att, x):
        h = att.num_heads
        q = _rotate(self._heads(att.q_proj(x), h), self.cos, self.sin)
        k = _rotate(self._heads(att.k_proj(x), h), self.cos, self.sin)
        v = self._heads(att.v_proj(x), h)
        out = attend(q, k, v, self.fused_attention)
        b, _, t, _ = out.shape
        return att.out_proj(out.transpose(1, 2).reshape(b, t, -1))

    def _cross_attn(self, att, x, mem, mem_k, ptr, ptr_k):
        h = att.num_heads
        q = _rotate(self._heads(att.q_proj(x), h), self.cos, self.sin)
        ks = self._heads(att.k_proj(mem_k), h)  # [1, h, M*T, d]
        n_tok = self.cos.shape[0]
        b, _, _, d = ks.shape
        ks = _rotate(ks.reshape(b, h, -1, n_tok, d), self.cos, self.sin).reshape(b, h, -1, d)
        k = torch.cat([ks, self._heads(att.k_proj(ptr_k), h)], dim=2)
        if self.fused_attention and h == 1:
            # Late values: each row of softmax(q k^T) sums to 1, so P (X W^T + b) =
            # (P X) W^T + b. Attending over the 64-wide memory tokens X and widening after
            # does the value product at 64 columns instead of 256 (at full bank 36,352 keys:
            # 5/8 of the layer's attention arithmetic); exact up to float rounding.
            raw = torch.cat([mem, ptr], dim=1)[:, None]  # [1, 1, M*T + 4P, 64]
            out = att.v_proj(attend(q, k, raw, True))  # [1, 1, T, 256]
        else:
            v = torch.cat([self._heads(att.v_proj(mem), h), self._heads(att.v_proj(ptr), h)],
                          dim=2)
            out = attend(q, k, v, self.fused_attention)
        return att.out_proj(out.transpose(1, 2).reshape(b, x.shape[1], -1))

    def forward(self, trk_feat_2, memory_feats, memory_rows, pointers, pointer_tpos):  # noqa: D102
        b, c, hh, ww = trk_feat_2.shape
        x = trk_feat_2.flatten(2).permute(0, 2, 1)
        if self.encoder.pos_enc_at_input:
            x = x + 0.1 * self.pos
        mem = memory_feats.flatten(2).permute(0, 2, 1)  # [M, T, 64]
        mem_pos = self.mem_pos + self.tpos_table[memory_rows][:, None, :]
        mem, mem_pos = mem.reshape(1, -1, self.mem_dim), mem_pos.reshape(1, -1, self.mem_dim)
        split = self.hidden // self.mem_dim
        ptr = pointers.reshape(1, -1, self.mem_dim)  # pointer p -> tokens p*split .. p*split+3
        ptr_pos = self.tpos_proj(sine_pe(pointer_tpos, self.hidden))
        ptr_pos = ptr_pos.repeat_interleave(split, dim=0).reshape(1, -1, self.mem_dim)
        for layer in self.encoder.layers:
            t2 = layer.norm1(x)
            x = x + self._self_attn(layer.self_attn, t2)
            t2 = layer.norm2(x)
            x = x + self._cross_attn(layer.cross_attn_image, t2, mem, mem + mem_pos,
                                     ptr, ptr + ptr_pos)
            t2 = layer.norm3(x)
            x = x + layer.linear2(layer.activation(layer.linear1(t2)))
        x = self.encoder.norm(x)
        return x.permute(0, 2, 1).reshape(b, c, hh, ww)


def check_memory_attention_config(model: nn.Module) -> None:
    """Refuse a tracker whose memory attention differs from what :class:`MemoryAttention` does."""
    enc = model.inst_interactive_predictor.model.transformer.encoder
    for layer in enc.layers:
        ok = (layer.pre_norm and not layer.cross_attention_first and not layer.pos_enc_at_attn
              and layer.pos_enc_at_cross_attn_keys and not layer.pos_enc_at_cross_attn_queries
              and layer.cross_attn_image is not None)
        if not ok:
            raise NotImplementedError("unexpected memory-attention layer configuration")
    if not math.isclose(float(enc.layers[0].self_attn.freqs_cis.shape[0]), 72 * 72):
        raise NotImplementedError("memory attention RoPE grid is not 72 x 72")
