"""``napari-sam3-onnx convert``: int8 in this CPU's format from a bundle's fp32 graphs.

For a bundle whose int8 weights are slow or inexact on this CPU (``doctor`` and the model panel
say so and print this command). The conversion itself is the exporter's torch-free
``napari_sam3_onnx.export.convert`` (onnx + onnxruntime's quantiser), run in a child process of
this Python: the plugin imports nothing of the exporter. The output goes to the data folder
(``<home>/converted/<bundle>-int8-<format>``) or ``--out``, never into the bundle's folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

from ..models.registry import home_dir


def cmd_convert(args: argparse.Namespace) -> int:
    """Check the request, then run the conversion; its exit code (2: refused input)."""
    from ..api.bundles import resolve_bundle
    from ..models.cpu_features import convert_target, cpu_features, int8_weights_note

    folder = resolve_bundle(args.bundle)
    cpu = cpu_features()
    out = args.out or convert_target(folder, cpu, home_dir())
    src, dst = folder.resolve(), Path(out).resolve()
    if dst == src or src in dst.parents:
        print(f"error: {out} is inside the bundle folder {folder}: the bundle is never written "
              "to; name a folder outside it", file=sys.stderr)
        return 2
    if importlib.util.find_spec("onnx") is None:
        print("error: convert needs the onnx package (the quantiser rewrites the graphs with "
              "it): pip install onnx", file=sys.stderr)
        return 1
    print(f"CPU: {cpu.summary()}; {int8_weights_note(args.int8_weights, cpu)}", flush=True)
    command = [sys.executable, "-m", "napari_sam3_onnx.export.convert", str(folder), str(out),
               "--int8-weights", args.int8_weights, "--verdicts", args.verdicts]
    return subprocess.call(command)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``convert``."""
    p = sub.add_parser(
        "convert", help="int8 in this CPU's format from a bundle's fp32 graphs, per workflow",
        description="Quantise the bundle's fp32 image encoder and memory attention to int8 in "
                    "the format that is exact and fast on this CPU (s8 with VNNI, u8 with AVX2 "
                    "only), gate them against fp32 workflow by workflow, and write one bundle "
                    "that runs int8 for the workflows that pass and fp32 for the others. "
                    "Needs onnx; no PyTorch. The bundle's own folder is only read.",
        epilog="example: napari-sam3-onnx convert ~/sam3-bundle --int8-weights auto")
    p.add_argument("bundle", help="bundle folder or id (its fp32 graphs are the source)")
    p.add_argument("--out", type=Path, default=None,
                   help="new folder (default: <home>/converted/<bundle>-int8-<format>)")
    p.add_argument("--int8-weights", choices=("auto", "s8", "u8", "s8-7bit"), default="auto",
                   help="auto (default): s8 where this CPU has VNNI, u8 where it has only AVX2")
    p.add_argument("--verdicts", choices=("gate", "reuse"), default="gate",
                   help="gate (default): judge the new graphs against fp32 (minutes per "
                        "workflow at full depth); reuse: take the bundle's recorded verdicts")
    p.set_defaults(func=cmd_convert)
