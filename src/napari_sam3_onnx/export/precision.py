"""fp16 and int8 variants of an ``nso-sam3`` bundle, gated by a decision-level comparison.

``to_fp16`` stores the weights of the big graphs (by default the image and language encoders,
~90 % of the bytes) as float16; graph inputs and outputs stay float32, so the adapter and the
engine are unchanged, and the prompt graphs stay fp32. Two modes:

* ``storage`` (default): fp16 *weights*, fp32 *compute*: each large float initializer is stored
  as float16 and cast back to float32 by a ``Cast`` node, which onnxruntime folds when the session
  loads. Half the download and disk, the same speed and run-time memory as fp32 (measured: the
  CPU lacks fast fp16 kernels, so fp16 compute is ~2.8x slower there);
* ``compute``: onnxruntime's ``convert_float_to_float16`` (``keep_io_types``): fp16 arithmetic,
  for execution providers with fp16 kernels (GPU).

``int8`` (:func:`to_int8`, :mod:`.quantize`): the encoders' linear layers in int8, the
sensitive ones (``--int8-last-blocks``, ``--int8-exclude``) kept fp32.

:func:`.gate.compare` then runs the same scenes and prompts through the plugin's engine on both
bundles and compares **decisions** (candidates, masks, kept detections, tracked masks); a
precision change is judged by these, not by tensor differences (model-contracts section 15).
A variant that fails is removed unless ``--keep-failed``.

Needs ``onnx`` and ``onnxruntime`` only (no torch).
Usage: ``python -m napari_sam3_onnx.export.precision FP32_BUNDLE OUT_BUNDLE
[--precision fp16|int8] [--graphs ...]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .gate import GATES, compare  # noqa: F401  (the gate lives in .gate)
from .manifest import read_manifest, write_manifest

DEFAULT_GRAPHS = ("image_encoder", "language_encoder")
PRECISIONS = ("fp32", "fp16", "int8")


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
            method: str = "dynamic", last_blocks: int = 0,
            exclude: Sequence[str] | None = None, token_table: str = "fp16") -> dict:
    """Copy bundle ``src`` to ``dst`` with the linear layers of ``graphs`` in int8.

    ``method``, ``last_blocks`` and ``exclude``: see :func:`.quantize.quantize_graph`;
    ``token_table``: storage of the language encoder's token embedding (``fp16``, ``int8``,
    ``fp32``; its ``embeddings``). Graph
    inputs and outputs stay float32. Returns the new manifest (``int8`` records what was done).
    """
    from .quantize import DEFAULT_EXCLUDE, quantize_graph
    src, dst = Path(src), Path(dst)
    manifest = read_manifest(src)
    dst.mkdir(parents=True, exist_ok=True)
    converted = {manifest["graphs"][r]: r for r in graphs}
    for name in manifest["files"]:
        if name not in converted:
            shutil.copyfile(src / name, dst / name)
    done = {}
    for name, role in sorted(converted.items()):
        done[role] = quantize_graph(src / name, dst / name, method=method,
                                    last_blocks=last_blocks,
                                    exclude=DEFAULT_EXCLUDE if exclude is None else exclude,
                                    embeddings=token_table if role == "language_encoder"
                                    else False)
    manifest["precision"] = f"int8 ({method}) in " + ", ".join(graphs) + "; fp32 elsewhere"
    manifest["int8"] = {"method": method, "last_blocks_fp32": last_blocks,
                        "token_table": token_table,
                        "exclude": list(DEFAULT_EXCLUDE if exclude is None else exclude),
                        "graphs": {r: {k: v for k, v in d.items() if k != "kept_fp32_nodes"}
                                   for r, d in done.items()}}
    write_manifest(dst, manifest)
    return manifest


def add_precision_arguments(p: argparse.ArgumentParser, default: str = "fp32") -> None:
    """The variant options shared by this command and the exporter's."""
    p.add_argument("--precision", choices=PRECISIONS, default=default,
                   help="fp16 / int8 variant of the encoders, gated against fp32")
    p.add_argument("--graphs", default=",".join(DEFAULT_GRAPHS),
                   help="manifest roles to convert (comma separated)")
    p.add_argument("--mode", choices=("storage", "compute"), default="storage",
                   help="fp16: fp16 weights with fp32 compute, or fp16 compute")
    p.add_argument("--int8-method", choices=("dynamic", "weight-only"), default="dynamic")
    p.add_argument("--int8-last-blocks", type=int, default=0,
                   help="int8: keep the last N transformer blocks of each graph fp32")
    p.add_argument("--int8-exclude", default=None,
                   help="int8: comma-separated node-name fragments kept fp32 "
                        "(default: /resizer/)")
    p.add_argument("--int8-token-table", choices=("fp16", "int8", "fp32"), default="fp16",
                   help="int8: storage of the language encoder's token embedding "
                        "(int8: one scale per table, 1.4 %% text-feature error on the reduced "
                        "model; fp16: float16 rounding only, +100 MB at full size)")
    p.add_argument("--keep-failed", action="store_true", help="keep a bundle that fails the gate")
    p.add_argument("--skip-gate", action="store_true",
                   help="write the variant ungated (manifest: decision_gate 'not run'); "
                        "gate it later with python -m napari_sam3_onnx.export.gate")
    p.add_argument("--fp32-out", type=Path, default=None,
                   help="exporter only: keep the fp32 reference bundle here")


def run_precision(args: argparse.Namespace, fp32: Path, out: Path) -> int:
    """Convert ``fp32`` to ``out`` as ``args`` say, gate it, report; 1 (removed) if gated out."""
    graphs = [g for g in args.graphs.split(",") if g]
    if args.precision == "fp16":
        manifest = to_fp16(fp32, out, graphs, args.mode)
    else:
        exclude = None if args.int8_exclude is None else [
            f for f in args.int8_exclude.split(",") if f]
        manifest = to_int8(fp32, out, graphs, method=args.int8_method,
                           last_blocks=args.int8_last_blocks, exclude=exclude,
                           token_table=getattr(args, "int8_token_table", "fp16"))
    if getattr(args, "skip_gate", False):
        manifest["decision_gate"] = "not run"
        write_manifest(out, manifest, rehash=False)
        print(f"wrote {out} ungated: python -m napari_sam3_onnx.export.gate {fp32} {out}")
        return 0
    result = compare(fp32, out)
    size = {k: sum(f["bytes"] for f in m["files"].values())
            for k, m in (("fp32", read_manifest(fp32)), ("out", manifest))}
    result["bytes"] = size
    manifest["decision_gate"] = result
    write_manifest(out, manifest, rehash=False)
    print(json.dumps(result, indent=2))
    if not result["passed"] and not args.keep_failed:
        shutil.rmtree(out)
        print(f"gated out: the {args.precision} bundle was removed "
              "(use --keep-failed to keep it)")
    return 0 if result["passed"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert, compare, report; exit 1 (and remove the output) if gated out."""
    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export.precision")
    p.add_argument("fp32", type=Path)
    p.add_argument("out", type=Path)
    add_precision_arguments(p, default="fp16")
    args = p.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        p.error(f"{args.out} exists and is not empty: name a new folder")
    return run_precision(args, args.fp32, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
