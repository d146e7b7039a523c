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
sensitive ones (``--int8-last-blocks``, ``--int8-exclude``) kept fp32. The conversions are in
:mod:`.variants`; this module is their command line and gate.

:func:`.gate.compare` then runs the same scenes and prompts through the plugin's engine on both
bundles and compares **decisions** (candidates, masks, kept detections, tracked masks); a
precision change is judged by these, not by tensor differences
(docs/layouts.md#judging-a-precision-change).
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

from ..models.workflow_precision import ROLES
from .gate import GATES, cached_decisions, compare  # noqa: F401  (the gate: .gate)
from .manifest import read_manifest, write_manifest
from .variants import (  # noqa: F401  (the conversions: .variants; importable from here)
    DEFAULT_GRAPHS,
    FP16_STORAGE,
    MIN_FP16_ELEMENTS,
    PRECISIONS,
    fp16_storage,
    to_fp16,
    to_int8,
)


def add_precision_arguments(p: argparse.ArgumentParser, default: str = "fp32") -> None:
    """The variant options shared by this command and the exporter's."""
    p.add_argument("--precision", choices=PRECISIONS, default=default,
                   help="fp16 / int8 variant of the encoders, gated against fp32")
    p.add_argument("--graphs", default=None,
                   help="manifest roles to convert (comma separated; default: "
                        + ",".join(DEFAULT_GRAPHS) + ")")
    p.add_argument("--mode", choices=("storage", "compute"), default="storage",
                   help="fp16: fp16 weights with fp32 compute, or fp16 compute")
    p.add_argument("--int8-candidates", choices=("per-workflow", "search", "custom"),
                   default="per-workflow",
                   help="int8: per-workflow (default): int8 image encoder and memory attention "
                        "for the workflows whose gate verdict passes, fp32 graphs for the "
                        "others, in one bundle (export.workflow_bundle); search: try the "
                        "recipes of export.candidates fastest first and keep the first that "
                        "passes every workflow; custom: the one variant named by --graphs / "
                        "--int8-method, one verdict")
    p.add_argument("--int8-method", choices=("dynamic", "weight-only"), default=None,
                   help="int8 custom: dynamic (int8 arithmetic, the default) or weight-only "
                        "(int8 weights, fp32 arithmetic)")
    p.add_argument("--int8-weights", choices=("auto", "s8", "u8", "s8-7bit"), default="auto",
                   help="int8 dynamic: weight format. auto (default): full-range signed s8 "
                        "where this CPU has VNNI (AVX-512 VNNI, AVX-VNNI, AMX), unsigned u8 "
                        "where it has only AVX2 (s8 saturates there); s8-7bit: signed 7-bit. "
                        "Export on the CPU class that will run the bundle, or name the format "
                        "(see export.quantize)")
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
    p.add_argument("--reference-cache", type=Path, default=None,
                   help="keep the fp32 decisions of the gate in this file (.npz) for later "
                        "runs")
    p.add_argument("--fp32-out", type=Path, default=None,
                   help="exporter only: keep the fp32 reference bundle here")


def int8_weights_for(request: str) -> tuple[str, str]:
    """The int8 weight format for ``--int8-weights`` and why: ``auto`` reads this CPU's flags.

    Returns
    -------
    tuple of str
        ``("s8", "auto: AMD EPYC: avx2 avx512f avx512_vnni ...")`` or ``("u8", "named")``.
    """
    if request != "auto":
        return request, "named"
    from ..models.cpu_features import best_int8_format, cpu_features

    cpu = cpu_features()
    return best_int8_format(cpu), f"auto: {cpu.summary()}"


def run_precision(args: argparse.Namespace, fp32: Path, out: Path) -> int:
    """Convert ``fp32`` to ``out`` as ``args`` say, gate it, report; 1 (removed) if gated out."""
    per_workflow = args.precision == "int8" and getattr(
        args, "int8_candidates", "custom") == "per-workflow"
    if per_workflow and (problem := argument_problem(args)):
        raise SystemExit(problem)
    defaults: tuple[str, ...] = DEFAULT_GRAPHS
    if per_workflow:  # the graphs a per-workflow bundle routes, those this bundle has
        defaults = tuple(r for r in ROLES if r in read_manifest(fp32)["graphs"])
    graphs = [g for g in (args.graphs or ",".join(defaults)).split(",") if g]
    exclude = None if args.int8_exclude is None else [
        f for f in args.int8_exclude.split(",") if f]
    weights, why = int8_weights_for(getattr(args, "int8_weights", "auto"))
    if args.precision == "int8":
        print(f"int8 weights: {weights} ({why})", flush=True)
    int8_options = {"last_blocks": args.int8_last_blocks, "exclude": exclude,
                    "token_table": getattr(args, "int8_token_table", "fp16"),
                    "weights": weights}
    if args.precision == "int8" and getattr(args, "int8_candidates", "custom") == "search":
        return _search(args, fp32, out, int8_options)
    if args.precision == "fp16":
        manifest = to_fp16(fp32, out, graphs, args.mode)
    else:
        manifest = to_int8(fp32, out, graphs, method=args.int8_method or "dynamic",
                           **int8_options)
    if getattr(args, "skip_gate", False):
        manifest["decision_gate"] = "not run"
        write_manifest(out, manifest, rehash=False)
        print(f"wrote {out} ungated: python -m napari_sam3_onnx.export.gate {fp32} {out}")
        return 0
    result = compare(cached_decisions(fp32, getattr(args, "reference_cache", None)), out)
    size = {k: sum(f["bytes"] for f in m["files"].values())
            for k, m in (("fp32", read_manifest(fp32)), ("out", manifest))}
    result["bytes"] = size
    if per_workflow:
        return _per_workflow(args, fp32, out, result, graphs)
    manifest["decision_gate"] = result
    write_manifest(out, manifest, rehash=False)
    print(json.dumps(result, indent=2))
    if not result["passed"] and not args.keep_failed:
        shutil.rmtree(out)
        print(f"gated out: the {args.precision} bundle was removed "
              "(use --keep-failed to keep it)")
    return 0 if result["passed"] else 1


def _per_workflow(args: argparse.Namespace, fp32: Path, out: Path, result: dict,
                  graphs: list[str]) -> int:
    """Make ``out`` the per-workflow bundle; 1 (removed unless kept) when no workflow passed."""
    from .workflow_bundle import compose

    manifest = compose(fp32, out, result["workflows"], graphs)
    manifest["decision_gate"] = result
    write_manifest(out, manifest, rehash=False)
    print(json.dumps(result, indent=2))
    print(f"wrote {out}: {manifest['precision']}")
    if any(r["precision"] == "int8" for r in manifest["workflow_precision"].values()):
        return 0
    if not args.keep_failed:
        shutil.rmtree(out)
        print("gated out: no workflow kept fp32's decisions in int8; the bundle was removed "
              "(use --keep-failed to keep it)")
    return 1


def argument_problem(args: argparse.Namespace) -> str | None:
    """Why the precision options cannot work (checked before any work), or None.

    Options that contradict each other, and a ``--reference-cache`` file that is not a cache
    (it would be refused only after minutes of conversion otherwise).
    """
    from .decision_cache import check_writable

    if (problem := check_writable(getattr(args, "reference_cache", None))) is not None:
        return problem
    candidates = getattr(args, "int8_candidates", "custom")
    if args.precision == "int8" and candidates == "per-workflow":
        return _per_workflow_problem(args)
    if args.precision != "int8" or candidates != "search":
        return None
    if args.graphs is not None or args.int8_method is not None:
        return ("--graphs / --int8-method name one variant: add --int8-candidates custom "
                "(the default search tries its own recipes)")
    if getattr(args, "skip_gate", False):
        return ("the int8 candidate search needs the gate: drop --skip-gate, or name one "
                "variant with --int8-candidates custom")
    return None


def _per_workflow_problem(args: argparse.Namespace) -> str | None:
    """Why ``--int8-candidates per-workflow`` cannot work with these options (None: it can)."""
    named = [g for g in (args.graphs or "").split(",") if g]
    if extra := sorted(set(named) - set(ROLES)):
        return (f"a per-workflow int8 bundle converts {', '.join(ROLES)} only, not "
                f"{', '.join(extra)}: add --int8-candidates custom for one verdict")
    if getattr(args, "skip_gate", False):
        return ("a per-workflow int8 bundle needs the gate's verdicts: drop --skip-gate, or "
                "add --int8-candidates custom")
    return None


def _search(args: argparse.Namespace, fp32: Path, out: Path, int8_options: dict) -> int:
    """``--precision int8`` with the candidate search (:mod:`.candidates`)."""
    from .candidates import search_int8

    if problem := argument_problem(args):
        raise SystemExit(problem)
    reference = cached_decisions(fp32, getattr(args, "reference_cache", None))
    record = search_int8(fp32, out, reference, keep_failed=args.keep_failed,
                         log=lambda m: print(m, flush=True), **int8_options)
    if record["chosen"] is None:
        print("no int8 candidate passed the gate"
              + (f"; the fastest was kept, marked failed, at {out}" if args.keep_failed
                 else ": nothing was written (use --keep-failed to keep the fastest)"))
        return 1
    print(f"wrote {out}: int8 candidate {record['chosen']!r} passed the gate")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert, compare, report; exit 1 (and remove the output) if gated out."""
    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export.precision")
    p.add_argument("fp32", type=Path)
    p.add_argument("out", type=Path)
    add_precision_arguments(p, default="fp16")
    args = p.parse_args(argv)
    if problem := argument_problem(args):
        p.error(problem)
    if args.out.exists() and any(args.out.iterdir()):
        p.error(f"{args.out} exists and is not empty: name a new folder")
    return run_precision(args, args.fp32, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
