"""Opening a bundle for the dock: the slow part, which runs in a worker (no Qt here).

Opening reads every graph's header (a chunked protobuf walk: ~10 ms of interpreter time for a
full-size encoder's 8,000 nodes, kept by file identity afterwards) and, for a bundle with a
language encoder, its tokenizer (a BPE vocabulary of ~50,000 merges, ~80 ms, kept likewise).
The model panel runs :func:`open_checked` in napari's thread pool when the user picks a folder,
with the model line's words (:func:`.bundle_words.bundle_words`), so the window keeps
repainting meanwhile; only attaching the result and setting the texts happen on the Qt thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from napari_sam3_onnx._napari.model.bundle_words import check_usable
from napari_sam3_onnx.api.workspace import language_cache
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.models.base import Capability, SamAdapter
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import ModelFileMissingError
from napari_sam3_onnx.models.openvino_runtime import openvino_devices
from napari_sam3_onnx.models.runtime import PROVIDER_ALIASES, RuntimeConfig, available_providers

#: Providers onnxruntime lists that do not run the model on this machine (Azure sends it to a
#: remote endpoint); they are not offered as a device.
NOT_LOCAL = frozenset({"AzureExecutionProvider"})


def device_choices() -> list[str]:
    """``"auto"``, the local providers of this onnxruntime, then OpenVINO's devices.

    OpenVINO's where ``openvino`` is installed (its bf16 device where the CPU has bf16).
    """
    short = {full: alias for alias, full in reversed(list(PROVIDER_ALIASES.items()))}
    return ["auto", *[short.get(p, p) for p in available_providers() if p not in NOT_LOCAL],
            *openvino_devices()]


class Tickets:
    """Which background load counts: the latest one, until the dock that started it closes.

    Plain Python (no Qt), so the dock's ``destroyed`` signal can drop the load in flight.
    """

    def __init__(self) -> None:
        self._latest = 0

    def new(self) -> int:
        """A ticket for a new load (every earlier one no longer counts)."""
        self._latest += 1
        return self._latest

    def counts(self, ticket: int) -> bool:
        """Whether the load holding ``ticket`` is still the one to show."""
        return ticket == self._latest

    def drop(self, _obj=None) -> None:
        """No load in flight counts any more (the dock closed)."""
        self._latest += 1


@dataclass(frozen=True)
class Opened:
    """A bundle opened and checked, ready to attach.

    Attributes
    ----------
    adapter : SamAdapter
        The model (weights load on the first encode).
    texts : TextCache or None
        Its language cache with the tokenizer read; None without a language encoder (or, for a
        bundle that also takes clicks, without a tokenizer file: the Text tab says so).
    """

    adapter: SamAdapter
    texts: TextCache | None


def open_checked(folder: Path, config: RuntimeConfig) -> Opened:
    """Open ``folder``, check the dock can use it and read its tokenizer.

    Raises
    ------
    Sam3OnnxError
        Not a bundle, one the dock cannot use, or a box-only bundle without its tokenizer.
    """
    adapter = open_adapter(folder, config)
    check_usable(adapter)
    texts = None
    if adapter.has(Capability.TEXT):
        try:
            texts = language_cache(adapter, folder)
        except ModelFileMissingError:
            if not adapter.has(Capability.CLICKS):  # boxes go through the detector: needed
                raise
    return Opened(adapter, texts)
