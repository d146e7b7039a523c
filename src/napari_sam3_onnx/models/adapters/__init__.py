"""Adapters, one per public SAM 3 ONNX export layout.

:data:`ADAPTERS` is the recognition order (../shared/model-contracts.md section 1, first match
wins). Each adapter class has ``match(graphs) -> roles | None`` and ``__init__(roles, config)``.
"""

from __future__ import annotations

from .hf_tracker import HfTrackerAdapter

ADAPTERS: tuple[type, ...] = (
    HfTrackerAdapter,
)

__all__ = ["ADAPTERS", "HfTrackerAdapter"]
