"""Open a folder of ONNX graphs as a SAM 3 bundle: recognise its layout from the graphs' names.

The recognition order of docs/layouts.md#how-a-folder-is-recognised is applied top to bottom to the
input/output names of every ``.onnx`` file in the folder (read from the file headers, no weights
loaded); the first adapter whose ``match`` accepts the graphs wins. File names are never trusted
alone: a graph is assigned to a role by what it takes and returns.
"""

from __future__ import annotations

from pathlib import Path

from .adapters import ADAPTERS, AdapterClass
from .base import SamAdapter
from .errors import ModelFileMissingError, ModelFileUnreadableError, UnknownLayoutError
from .graph_info import GraphSignature, read_signature
from .runtime import RuntimeConfig
from .workflow_precision import read_bf16


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
    try:
        entries = sorted(p for p in folder.iterdir() if p.name.lower().endswith(".onnx"))
    except PermissionError as exc:
        raise ModelFileUnreadableError(folder, "bundle folder") from exc
    if dirs := [p.name for p in entries if p.is_dir()]:
        raise UnknownLayoutError(folder, [], note=(
            f"{', '.join(dirs)} is a folder, not an .onnx file: put the graph files themselves "
            f"in {folder} (a bundle is one folder of .onnx files, not folders inside it)"))
    return {p.name: read_signature(p) for p in entries}


def recognise(folder: Path | str) -> tuple[AdapterClass, dict[str, GraphSignature]]:
    """Find the adapter class for the graphs in ``folder`` and the graphs it assigns to roles."""
    graphs = read_folder(folder)
    for adapter in ADAPTERS:
        roles = adapter.match(graphs)
        if roles is not None:
            _refuse_second_bundle(folder, graphs, roles)
            return adapter, roles
    raise UnknownLayoutError(folder, [g.describe() for g in graphs.values()])


def _refuse_second_bundle(folder: Path | str, graphs: dict[str, GraphSignature],
                          roles: dict[str, GraphSignature]) -> None:
    """Raise when the graphs left over after matching form a whole second bundle.

    Matching takes the first graph that fits each role, so a folder holding two exports (or
    two copies of one) would silently use whichever sorts first. Variants that share an
    encoder (pagarcia's single/multi decoders) are one bundle: their leftovers match nothing.
    """
    used = {g.path.name for g in roles.values()}
    rest = {n: g for n, g in graphs.items() if n not in used}
    other = next((a.layout for a in ADAPTERS if rest and a.match(rest) is not None), None)
    if other:
        raise UnknownLayoutError(folder, [], note=(
            f"it holds the graphs of a second {other} bundle ({', '.join(sorted(rest))}) "
            f"besides {', '.join(sorted(used))}: put each bundle in its own folder"))


def open_adapter(folder: Path | str, config: RuntimeConfig | None = None) -> SamAdapter:
    """Recognise the bundle in ``folder`` and open its adapter (sessions load lazily on first use).

    The adapter alone; :func:`napari_sam3_onnx.api.open_bundle` wraps it in a ``Bundle`` (id,
    capabilities, cache, tokenizer) for the workflows.

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
    config = config or RuntimeConfig()
    if config.openvino == "bf16" and not getattr(adapter_cls, "routes_bf16", False) and \
            not read_bf16(folder, config.bf16_everywhere).workflow_bf16(None):
        # a layout that cannot choose bf16 per workflow runs it for all or none: bf16 only
        # when its manifest's bf16 verdicts pass every workflow (or the gate judges bf16)
        config = config.exact()
    return adapter_cls(roles, config)
