"""SAM's mask decoder for B objects on one image, without repeating the image's own work B times.

Upstream's ``MaskDecoder.predict_masks(repeat_image=True)`` copies the image embedding and its
positional encoding once per object before the two-way transformer, so everything computed from
them alone is computed B times: the copies themselves, the no-mask dense embedding broadcast to
``[B, 256, 72, 72]``, the flattening transposes, and the first layer's projections of the image
tokens (keys and values of the token-to-image attention, queries of the image-to-token
attention), which no prompt has touched yet. Profiled on the full-depth export at 16 clicks per
call (onnxruntime, 2 threads) that was 34 % of the decoder's time.

:func:`predict_masks_shared_image` is the same arithmetic in the same order with those steps
done once on the batch-1 image; the per-object tensors appear where the first layer's
image-to-token attention writes into the image tokens (and the projections are broadcast to B
as they enter attention). Only the traced graph's cost changes: the parity tests compare it with
upstream's ``predict_masks``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _attend(att: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Upstream ``Attention.forward`` where q, k, v may have batch 1 (projected once, then B)."""
    q, k, v = att.q_proj(q), att.k_proj(k), att.v_proj(v)
    batch = max(q.shape[0], k.shape[0], v.shape[0])
    q, k, v = (att._separate_heads(x.expand(batch, -1, -1), att.num_heads) for x in (q, k, v))
    return att.out_proj(att._recombine_heads(F.scaled_dot_product_attention(q, k, v)))


def _first_layer(layer: nn.Module, queries, keys, query_pe, key_pe):
    """Upstream ``TwoWayAttentionBlock.forward`` (``skip_first_layer_pe``) with batch-1 keys."""
    queries = layer.norm1(layer.self_attn(q=queries, k=queries, v=queries))
    q, k = queries + query_pe, keys + key_pe
    queries = layer.norm2(queries + _attend(layer.cross_attn_token_to_image, q, k, keys))
    queries = layer.norm3(queries + layer.mlp(queries))
    q, k = queries + query_pe, keys + key_pe
    keys = keys + _attend(layer.cross_attn_image_to_token, k, q, queries)  # -> B objects
    return queries, layer.norm4(keys)


def _transformer(tf: nn.Module, image: torch.Tensor, image_pe: torch.Tensor,
                 tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream ``TwoWayTransformer.forward`` on a batch-1 ``image`` and B ``tokens``."""
    keys = image.flatten(2).permute(0, 2, 1)
    key_pe = image_pe.flatten(2).permute(0, 2, 1)
    first, *rest = tf.layers
    if not first.skip_first_layer_pe or any(layer.skip_first_layer_pe for layer in rest):
        raise ValueError("the mask decoder's transformer is not SAM's (PE skipped on layer 0 only)")
    queries, keys = _first_layer(first, tokens, keys, tokens, key_pe)
    for layer in rest:
        queries, keys = layer(queries=queries, keys=keys, query_pe=tokens, key_pe=key_pe)
    q, k = queries + tokens, keys + key_pe
    queries = tf.norm_final_attn(queries + tf.final_attn_token_to_image(q=q, k=k, v=keys))
    return queries, keys


def predict_masks_shared_image(
    dec: nn.Module,
    image_embeddings: torch.Tensor,
    image_pe: torch.Tensor,
    sparse_prompt_embeddings: torch.Tensor,
    dense_prompt_embeddings: torch.Tensor,
    high_res_features: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``dec.predict_masks(..., repeat_image=True)`` for a batch-1 image and dense prompt.

    Parameters
    ----------
    dec : sam3's ``MaskDecoder`` (with object scores and high-resolution features)
    image_embeddings, dense_prompt_embeddings : torch.Tensor
        ``[1, C, h, w]``: the image and its (one) dense prompt, shared by every object.
    image_pe : torch.Tensor
        ``[1, C, h, w]`` positional encoding.
    sparse_prompt_embeddings : torch.Tensor
        ``[B, N, C]``: one object's prompt per row.
    high_res_features : list of torch.Tensor
        ``[feat_s0 [1, C/8, 4h, 4w], feat_s1 [1, C/4, 2h, 2w]]``.

    Returns
    -------
    masks ``[B, T, 4h, 4w]``, iou ``[B, T]``, mask tokens ``[B, T, C]``, object score ``[B, 1]``
    (upstream's outputs and order).
    """
    if not (dec.pred_obj_scores and dec.use_high_res_features):
        raise ValueError("expected SAM 3's tracker mask decoder (object scores, high-res features)")
    output_tokens = torch.cat([dec.obj_score_token.weight, dec.iou_token.weight,
                               dec.mask_tokens.weight], dim=0)
    batch = sparse_prompt_embeddings.size(0)
    output_tokens = output_tokens.unsqueeze(0).expand(batch, -1, -1)
    tokens = torch.cat((output_tokens, sparse_prompt_embeddings), dim=1)
    src = image_embeddings + dense_prompt_embeddings
    _, c, h, w = src.shape
    hs, keys = _transformer(dec.transformer, src, image_pe, tokens)
    iou_token_out = hs[:, 1, :]
    mask_tokens_out = hs[:, 2:2 + dec.num_mask_tokens, :]
    src = keys.transpose(1, 2).reshape(batch, c, h, w)
    dc1, ln1, act1, dc2, act2 = dec.output_upscaling
    feat_s0, feat_s1 = high_res_features
    upscaled = act1(ln1(dc1(src) + feat_s1))
    upscaled = act2(dc2(upscaled) + feat_s0)
    hyper_in = torch.stack([mlp(mask_tokens_out[:, i, :])
                            for i, mlp in enumerate(dec.output_hypernetworks_mlps)], dim=1)
    b, c2, h2, w2 = upscaled.shape
    masks = (hyper_in @ upscaled.view(b, c2, h2 * w2)).view(b, -1, h2, w2)
    iou_pred = dec.iou_prediction_head(iou_token_out)
    object_score_logits = dec.pred_obj_score_head(hs[:, 0, :])
    return masks, iou_pred, mask_tokens_out, object_score_logits
