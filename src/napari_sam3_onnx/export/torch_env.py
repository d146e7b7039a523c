"""Shims that let Meta's ``sam3`` code build, run and trace on a CPU-only host.

Every patch here changes where tensors live or how an operation is written down, never the
arithmetic of the model:

* ``device="cuda"`` in tensor factories becomes ``"cpu"``: ``sam3`` creates a few constant tables
  on the GPU unconditionally while it builds (``TransformerDecoder._get_coords``,
  ``PositionEmbeddingSine`` precompute);
* ``Tensor.cuda()`` and ``Tensor.pin_memory()`` are the identity: the tracker moves memories
  "back to the GPU" (``sam3_tracker_base``, ``sam3_tracking_predictor``) and the geometry encoder
  pins a 4-element scale (``geometry_encoders._encode_boxes``); on a CPU host both are copies of
  the same values;
* ``torch._assert_async`` (a GPU-side assertion in ``concat_padded_sequences``) is a no-op while
  tracing: it checks right-padding, which the exported graphs' callers guarantee;
* bf16 autocast is off: ``sam3`` opens ``torch.autocast("cuda", bfloat16)`` contexts, which are
  inert without CUDA; nothing here turns them on, so every export and reference run is fp32.

:func:`fp32_memory_storage` is used only by the PyTorch *reference* of the parity checks: the
tracking predictor stores memories as bf16 (``maskmem_features.to(torch.bfloat16)``) even on a CPU,
which would round them; the exported graphs keep fp32, so the reference is made to keep fp32 too.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode


class _CudaToCpu(TorchFunctionMode):
    """Rewrite ``device="cuda..."`` keyword arguments of torch functions to ``"cpu"``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dev = kwargs.get("device")
        if dev is not None and str(dev).startswith("cuda"):
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


def _identity(self: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
    return self


@contextlib.contextmanager
def cpu_host() -> Iterator[None]:
    """Run ``sam3`` code on a CPU: cuda/pin_memory as identity, cuda factories on the CPU."""
    saved = (torch.Tensor.cuda, torch.Tensor.pin_memory, torch._assert_async)
    torch.Tensor.cuda = _identity  # type: ignore[method-assign]
    torch.Tensor.pin_memory = _identity  # type: ignore[method-assign]
    torch._assert_async = lambda *a, **k: None  # type: ignore[assignment]
    mode = _CudaToCpu()
    mode.__enter__()
    try:
        yield
    finally:
        mode.__exit__(None, None, None)
        torch.Tensor.cuda, torch.Tensor.pin_memory, torch._assert_async = saved


class _Fp32Torch(types.ModuleType):
    """``torch`` with ``bfloat16`` meaning ``float32`` (for one module's global name only)."""

    def __init__(self) -> None:
        super().__init__("torch")

    def __getattr__(self, name: str) -> object:
        return torch.float32 if name == "bfloat16" else getattr(torch, name)


@contextlib.contextmanager
def fp32_memory_storage() -> Iterator[None]:
    """Reference only: keep the tracking predictor's stored memories in fp32, not bf16."""
    import sam3.model.sam3_tracking_predictor as tp

    saved = tp.torch
    tp.torch = _Fp32Torch()  # type: ignore[assignment]
    try:
        yield
    finally:
        tp.torch = saved
