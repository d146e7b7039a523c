"""Adapters, one per public SAM 3 ONNX export layout.

:data:`ADAPTERS` is the recognition order (../shared/model-contracts.md section 1, first match
wins). Each adapter class has ``match(graphs) -> roles | None`` and ``__init__(roles, config)``.
"""

from __future__ import annotations

from .autognosi import AutognosiAdapter
from .comicapp import ComicAppAdapter
from .hf_tracker import HfTrackerAdapter
from .jax_video import JaxVideoAdapter
from .nso import NsoAdapter
from .pagarcia import PagarciaTrackerAdapter
from .samexporter import SamexporterAdapter
from .wkentaro import WkentaroV03Adapter, WkentaroV06Adapter

ADAPTERS: tuple[type, ...] = (
    NsoAdapter,
    JaxVideoAdapter,
    PagarciaTrackerAdapter,
    AutognosiAdapter,
    HfTrackerAdapter,
    ComicAppAdapter,
    SamexporterAdapter,
    WkentaroV06Adapter,
    WkentaroV03Adapter,
)

__all__ = [
    "ADAPTERS",
    "AutognosiAdapter",
    "ComicAppAdapter",
    "HfTrackerAdapter",
    "JaxVideoAdapter",
    "NsoAdapter",
    "PagarciaTrackerAdapter",
    "SamexporterAdapter",
    "WkentaroV03Adapter",
    "WkentaroV06Adapter",
]
