"""Open a folder of ONNX graphs as a SAM 3 bundle: recognise its layout from the graphs' names.

The decision list of ../shared/model-contracts.md section 1 is applied top to bottom to the
input/output names of every ``.onnx`` file in the folder (read from the file headers, no weights
loaded); the first adapter whose ``match`` accepts the graphs wins. File names are never trusted
alone: a graph is assigned to a role by what it takes and returns.
"""

from __future__ import annotations

from pathlib import Path

from .adapters import ADAPTERS
from .base import SamAdapter
from .errors import ModelFileMissingError, UnknownLayoutError
from .graph_info import GraphSignature, read_signature
from .runtime import RuntimeConfig


def read_folder(folder: Path | str) -> dict[str, GraphSignature]:
    """Signatures of every ``.onnx`` file in ``folder`` keyed by file name.

    Raises
    ------
    ModelFileMissingError
        The folder does not exist.
    CorruptModelError
        A graph file is truncated or not ONNX.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFileMissingError(folder, "Expected a folder holding the bundle's .onnx files.")
    return {p.name: read_signature(p) for p in sorted(folder.glob("*.onnx"))}


def recognise(folder: Path | str) -> tuple[type[SamAdapter], dict[str, GraphSignature]]:
    """Find the adapter class for the graphs in ``folder`` and the graphs it assigns to roles."""
    graphs = read_folder(folder)
    for adapter in ADAPTERS:
        roles = adapter.match(graphs)
        if roles is not None:
            return adapter, roles
    raise UnknownLayoutError(folder, [g.describe() for g in graphs.values()])


def open_bundle(folder: Path | str, config: RuntimeConfig | None = None) -> SamAdapter:
    """Recognise and open the bundle in ``folder`` (sessions load lazily on first use).

    Parameters
    ----------
    folder : Path or str
        Folder holding the bundle's ``.onnx`` (and ``.data``) files.
    config : RuntimeConfig, optional
        Providers, threads and memory options for the sessions.

    Returns
    -------
    SamAdapter
        The layout's adapter; ``adapter.layout`` names the layout and ``adapter.capabilities``
        what it can do.
    """
    adapter_cls, roles = recognise(folder)
    return adapter_cls(roles, config or RuntimeConfig())
