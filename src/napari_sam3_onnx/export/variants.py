"""The conversions behind the fp16 and int8 variants of an ``nso-sam3`` bundle (no torch).

:func:`to_fp16` and :func:`to_int8` copy a bundle with some graphs converted and record what was
done in its manifest; :mod:`.precision` is their command line and gate, :mod:`.candidates` the
int8 search that tries several :func:`to_int8` recipes. Needs ``onnx`` and ``onnxruntime``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..models.workflow_precision import BF16_KEY
from .manifest import read_manifest, write_manifest

DEFAULT_GRAPHS = ("image_encoder", "language_encoder")
PRECISIONS = ("fp32", "fp16", "int8")


#: The per-graph "method" of :func:`to_int8` that stores fp16 weights instead of int8.
FP16_STORAGE = "fp16-storage"
_WORDS = {"dynamic": "int8", "weight-only": "int8 weights (fp32 arithmetic)",
          FP16_STORAGE: "fp16 weights"}
#: Initializers smaller than this stay float32 in ``storage`` mode (biases, norms: no gain).
MIN_FP16_ELEMENTS = 4096


def fp16_storage(model):
    """The model with large float32 initializers stored as float16 + a Cast back to float32."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    casts, keep = [], []
    for init in graph.initializer:
        n = int(np.prod(init.dims)) if init.dims else 1
        if init.data_type != onnx.TensorProto.FLOAT or n < MIN_FP16_ELEMENTS:
            keep.append(init)
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16),
                                       init.name + "__fp16")
        keep.append(half)
        casts.append(helper.make_node("Cast", [half.name], [init.name], to=onnx.TensorProto.FLOAT,
                                      name=init.name + "__to_fp32"))
    del graph.initializer[:]
    graph.initializer.extend(keep)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def to_fp16(src: Path | str, dst: Path | str, graphs: Sequence[str] = DEFAULT_GRAPHS,
            mode: str = "storage") -> dict:
    """Copy bundle ``src`` to ``dst`` with ``graphs`` (manifest roles) in fp16 (see ``mode``)."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    if mode not in ("storage", "compute"):
        raise ValueError(f"mode must be 'storage' or 'compute', not {mode!r}")

    src, dst = Path(src), Path(dst)
    manifest = read_manifest(src)
    manifest.pop(BF16_KEY, None)  # bf16 verdicts judged the source's graphs, not these
    dst.mkdir(parents=True, exist_ok=True)
    converted = {manifest["graphs"][r] for r in graphs}
    for name in manifest["files"]:
        if name not in converted:
            shutil.copyfile(src / name, dst / name)
    for name in sorted(converted):
        model = onnx.load(str(src / name))
        half = (fp16_storage(model) if mode == "storage"
                else convert_float_to_float16(model, keep_io_types=True))
        onnx.save(half, str(dst / name))
    manifest["precision"] = (f"fp16 {'weights (fp32 compute)' if mode == 'storage' else 'compute'}"
                             " in " + ", ".join(graphs) + "; fp32 elsewhere")
    manifest["fp16_graphs"] = list(graphs)
    manifest["fp16_mode"] = mode
    write_manifest(dst, manifest)
    return manifest


def to_int8(src: Path | str, dst: Path | str, graphs: Sequence[str] = DEFAULT_GRAPHS, *,
            method: str | Mapping[str, str] = "dynamic", last_blocks: int = 0,
            exclude: Sequence[str] | None = None, token_table: str = "fp16",
            weights: str = "u8", prebuilt: Mapping[str, tuple[Path, dict]] | None = None
            ) -> dict:
    """Copy bundle ``src`` to ``dst`` with the linear layers of ``graphs`` in int8.

    ``method`` (one for every graph, or one per role: a method of
    :func:`.quantize.quantize_graph`, or ``"fp16-storage"`` to store that graph's weights as
    fp16 instead, see :func:`fp16_storage`), ``last_blocks``, ``exclude`` and ``weights``: see
    :func:`.quantize.quantize_graph`;
    ``token_table``: storage of the language encoder's token embedding (``fp16``, ``int8``,
    ``fp32``; its ``embeddings``). Graph
    inputs and outputs stay float32. ``prebuilt``: role -> (file, its ``int8.graphs`` record)
    of a graph already converted with the same method and options (the candidate search reuses
    one conversion in several candidates); it is copied instead of converted again.
    Returns the new manifest (``int8`` records what was done).
    """
    from .quantize import DEFAULT_EXCLUDE, quantize_graph
    src, dst = Path(src), Path(dst)
    manifest = read_manifest(src)
    manifest.pop(BF16_KEY, None)  # bf16 verdicts judged the source's graphs, not these
    dst.mkdir(parents=True, exist_ok=True)
    converted = {manifest["graphs"][r]: r for r in graphs}
    methods = {r: method if isinstance(method, str) else method[r] for r in graphs}
    for name in manifest["files"]:
        if name not in converted:
            shutil.copyfile(src / name, dst / name)
    done = {}
    for name, role in sorted(converted.items()):
        if prebuilt and role in prebuilt:
            shutil.copyfile(prebuilt[role][0], dst / name)
            done[role] = dict(prebuilt[role][1])
            continue
        if methods[role] == FP16_STORAGE:  # a mixed bundle: this graph's weights fp16 only
            import onnx

            onnx.save(fp16_storage(onnx.load(str(src / name))), str(dst / name))
            done[role] = {"method": FP16_STORAGE}
            continue
        done[role] = quantize_graph(src / name, dst / name, method=methods[role],
                                    last_blocks=last_blocks, weights=weights,
                                    exclude=DEFAULT_EXCLUDE if exclude is None else exclude,
                                    embeddings=token_table if role == "language_encoder"
                                    else False)
    manifest["precision"] = ("int8: " + ", ".join(
        f"{r.replace('_', ' ')} {_WORDS.get(methods[r], methods[r])}" for r in graphs)
        + "; the rest fp32")  # what the model panel shows
    manifest["int8"] = {"method": method if isinstance(method, str) else methods,
                        "weights": weights, "last_blocks_fp32": last_blocks,
                        "token_table": token_table,
                        "exclude": list(DEFAULT_EXCLUDE if exclude is None else exclude),
                        "graphs": {r: {k: v for k, v in d.items() if k != "kept_fp32_nodes"}
                                   for r, d in done.items()}}
    write_manifest(dst, manifest)
    return manifest
