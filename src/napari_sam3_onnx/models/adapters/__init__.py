"""Adapters, one per public SAM 3 ONNX export layout.

:data:`ADAPTERS` is the recognition order (../shared/model-contracts.md section 1, first match
wins). Each adapter class has ``match(graphs) -> roles | None`` and ``__init__(roles, config)``.
"""

from __future__ import annotations

from .hf_tracker import HfTrackerAdapter
from .jax_video import JaxVideoAdapter
from .pagarcia import PagarciaTrackerAdapter

ADAPTERS: tuple[type, ...] = (
    JaxVideoAdapter,
    PagarciaTrackerAdapter,
    HfTrackerAdapter,
)

__all__ = ["ADAPTERS", "HfTrackerAdapter", "JaxVideoAdapter", "PagarciaTrackerAdapter"]
