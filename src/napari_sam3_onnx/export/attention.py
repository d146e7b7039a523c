"""Attention exported as onnxruntime's fused ``com.microsoft.MultiHeadAttention`` kernel.

Traced op by op, ``F.scaled_dot_product_attention`` becomes ``MatMul -> Softmax -> MatMul``:
onnxruntime then holds the whole score tensor. In SAM 3's ViT each of the 4 global-attention
blocks makes ``16 x 5184 x 5184`` fp32 scores (1.7 GB) - the encoder's memory peak - and the
memory attention ``5184 x (M x 5184)`` per tracked slice. The contrib operator
``MultiHeadAttention`` (domain ``com.microsoft``, CPU kernel since onnxruntime 1.17) computes
the same softmax attention in tiles without storing the scores (measured on one global block:
1.6 s and 0.24 GB against 6.7 s and 1.9 GB; outputs within 6e-8).

In PyTorch the operator's ``forward`` *is* ``scaled_dot_product_attention`` (the reference
paths and the parity tests are unchanged); only the traced graph differs. :func:`fused_attention`
switches it on for one export: the ViT's ``Attention`` blocks get a forward that calls it (same
projections, RoPE and reshapes as upstream), and wrappers with a ``fused_attention`` attribute
(:class:`~.graphs.MemoryAttention`) use :func:`attend` with it set.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

#: Custom opset the fused graphs import (pass to ``torch.onnx.export(custom_opsets=...)``).
CUSTOM_OPSETS = {"com.microsoft": 1}


class FusedMultiHeadAttention(torch.autograd.Function):
    """``softmax(q k^T / sqrt(d)) v`` over ``num_heads`` heads; exported as one contrib node.

    ``q [B, Lq, D]``, ``k [B, Lk, D]``, ``v [B, Lk, Dv]`` float32 (heads packed in the last
    axis, head ``h`` = columns ``h*D/num_heads ..``; ``Dv`` may differ from ``D``) ->
    ``[B, Lq, Dv]``.
    """

    @staticmethod
    def forward(ctx, q, k, v, num_heads: int):  # noqa: D102
        b, lq, _ = q.shape

        def heads(x):
            return x.reshape(b, x.shape[1], num_heads, x.shape[2] // num_heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(q), heads(k), heads(v))
        return out.transpose(1, 2).reshape(b, lq, -1)

    @staticmethod
    def symbolic(g, q, k, v, num_heads: int):  # noqa: D102
        from torch.onnx import symbolic_helper

        out = g.op("com.microsoft::MultiHeadAttention", q, k, v, num_heads_i=num_heads)
        qs, vs = symbolic_helper._get_tensor_sizes(q), symbolic_helper._get_tensor_sizes(v)
        if qs is not None and vs is not None:  # [B, Lq] of q, the value width of v
            out.setType(q.type().with_sizes([qs[0], qs[1], vs[-1]]))
        else:
            out.setType(q.type())
        return out


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, fused: bool) -> torch.Tensor:
    """Scaled dot-product attention of ``[B, heads, L, d]`` tensors, fused when exporting.

    Returns ``[B, heads, Lq, d]`` either way (the fused path packs and unpacks the heads).
    """
    if not fused:
        return F.scaled_dot_product_attention(q, k, v)
    b, h, lq, _ = q.shape

    def packed(x):
        return x.transpose(1, 2).reshape(b, -1, h * int(x.shape[-1]))

    out = FusedMultiHeadAttention.apply(packed(q), packed(k), packed(v), int(h))
    return out.reshape(b, lq, h, -1).transpose(1, 2)


def _fused_vit_forward(self, x: torch.Tensor) -> torch.Tensor:
    """``sam3.model.vitdet.Attention.forward`` (no rel-pos, no cls token) with the fused op."""
    spatial = tuple(x.shape[1:-1])  # (H, W) for 4-D windows, (L,) for token sequences
    b = x.shape[0]
    qkv = self.qkv(x).reshape(b, -1, 3, self.num_heads, self.head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    q, k = self._apply_rope(q, k)
    out = attend(q, k, v, fused=True).transpose(1, 2).reshape(b, *spatial, -1)
    return self.proj(out)


def _is_vit_attention(mod: nn.Module) -> bool:
    return (type(mod).__name__ == "Attention" and type(mod).__module__.endswith("vitdet")
            and hasattr(mod, "qkv") and hasattr(mod, "_apply_rope"))


@contextlib.contextmanager
def fused_attention(wrapper: nn.Module, enabled: bool = True) -> Iterator[nn.Module]:
    """Within the block, ``wrapper`` traces its attention as the fused contrib operator.

    Restores every patched forward afterwards (the model is shared with the reference paths).
    """
    patched: list[nn.Module] = []
    flag = hasattr(wrapper, "fused_attention")
    try:
        if enabled:
            for mod in wrapper.modules():
                if not _is_vit_attention(mod):
                    continue
                if mod.use_rel_pos or mod.cls_token:
                    raise NotImplementedError("fused ViT attention: rel-pos / cls token")
                mod.forward = types.MethodType(_fused_vit_forward, mod)
                patched.append(mod)
            if flag:
                wrapper.fused_attention = True
        yield wrapper
    finally:
        for mod in patched:
            del mod.forward
        if flag:
            wrapper.fused_attention = False


def uses_fused_attention(model) -> bool:
    """Whether an ``onnx.ModelProto`` contains the fused attention operator."""
    return any(n.op_type == "MultiHeadAttention" and n.domain == "com.microsoft"
               for n in model.graph.node)
