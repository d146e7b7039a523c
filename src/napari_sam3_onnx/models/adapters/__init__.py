"""Adapters, one per public SAM 3 ONNX export layout.

:data:`ADAPTERS` is the recognition order (docs/layouts.md#how-a-folder-is-recognised,
first match wins). Each adapter class has ``match(graphs) -> roles | None`` and
``__init__(roles, config)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..base import SamAdapter
from ..graph_info import GraphSignature
from ..runtime import RuntimeConfig
from .autognosi import AutognosiAdapter
from .comicapp import ComicAppAdapter, PixlAdapter
from .hf_sam3 import HfSam3Adapter
from .hf_tracker import HfTrackerAdapter
from .jax_video import JaxVideoAdapter
from .nso import NsoAdapter
from .pagarcia import PagarciaTrackerAdapter
from .samexporter import SamexporterAdapter
from .wkentaro import WkentaroV02Adapter, WkentaroV03Adapter, WkentaroV06Adapter


class AdapterClass(Protocol):
    """What recognition needs of an adapter class: its layout, ``match`` and the constructor."""

    @property
    def layout(self) -> str:
        """The layout's name."""
        ...

    def match(self, graphs: Mapping[str, GraphSignature]) -> dict[str, GraphSignature] | None:
        """The graphs assigned to roles, or None when the folder is not this layout."""
        ...

    def __call__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig
                 ) -> SamAdapter:
        """Open the bundle (sessions load lazily)."""
        ...


ADAPTERS: tuple[AdapterClass, ...] = (
    NsoAdapter,
    JaxVideoAdapter,
    PagarciaTrackerAdapter,
    AutognosiAdapter,
    HfSam3Adapter,
    HfTrackerAdapter,
    PixlAdapter,
    ComicAppAdapter,
    SamexporterAdapter,
    WkentaroV06Adapter,
    WkentaroV03Adapter,
    WkentaroV02Adapter,
)

__all__ = [
    "ADAPTERS",
    "AdapterClass",
    "AutognosiAdapter",
    "ComicAppAdapter",
    "HfSam3Adapter",
    "HfTrackerAdapter",
    "JaxVideoAdapter",
    "NsoAdapter",
    "PagarciaTrackerAdapter",
    "PixlAdapter",
    "SamexporterAdapter",
    "WkentaroV02Adapter",
    "WkentaroV03Adapter",
    "WkentaroV06Adapter",
]
