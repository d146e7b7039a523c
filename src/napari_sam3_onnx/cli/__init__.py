"""Command line: inspect bundles and check the runtime without napari.

``napari-sam3-onnx inspect FOLDER`` recognises a bundle's layout and prints its geometry and
capabilities; ``napari-sam3-onnx doctor`` lists the execution providers this onnxruntime offers.
The batch commands (fetch, precompute, text search, propagate) build on the same engine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .models.errors import Sam3OnnxError


def _inspect(args: argparse.Namespace) -> int:
    from .models.bundle import open_bundle

    adapter = open_bundle(args.folder)
    print(f"layout:       {adapter.layout}")
    print(f"input size:   {adapter.input_size[0]} x {adapter.input_size[1]} (rows x cols)")
    print(f"mask size:    {adapter.mask_size[0]} x {adapter.mask_size[1]}")
    caps = ", ".join(sorted(c.value for c in adapter.capabilities))
    print(f"capabilities: {caps}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    import onnxruntime as ort

    from .models.runtime import available_providers, resolve_providers

    print(f"onnxruntime {ort.__version__}")
    print(f"available providers: {', '.join(available_providers())}")
    print(f"'auto' uses:         {', '.join(resolve_providers('auto'))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-command per task."""
    parser = argparse.ArgumentParser(
        prog="napari-sam3-onnx",
        description="SAM 3 through ONNX Runtime: bundles, embeddings and batch segmentation.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="recognise a bundle folder and print what it can do")
    p.add_argument("folder", help="folder holding the bundle's .onnx files")
    p.set_defaults(func=_inspect)
    p = sub.add_parser("doctor", help="show the onnxruntime version and execution providers")
    p.set_defaults(func=_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (1 on a handled error)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except Sam3OnnxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
