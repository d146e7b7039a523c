"""Command line: bundles, embeddings and batch segmentation without napari.

Sub-commands: ``list``, ``fetch``, ``inspect``, ``doctor`` (bundles and runtime),
``precompute`` (encode stacks into a zarr embedding store, optionally on a dask cluster),
``text`` (concept search to a labels stack and a CSV table) and ``propagate`` (carry seeded
objects through z or t). Each has ``--help``. All of them call :mod:`napari_sam3_onnx.api`.

Exit codes: 0 success; 1 a handled error (a missing or damaged model file, a bundle that cannot
do what was asked, a checksum mismatch); 2 bad input (an unreadable or wrongly shaped image, an
unknown bundle id, a bad option or prompt, or a failed download); 130 interrupted with Ctrl+C
(finished store entries are kept: run the same command again to resume).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..api.io import InputError
from ..models.errors import PromptError, Sam3OnnxError
from ..models.registry import UnknownBundleError

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-command per task."""
    from . import auto_cmds, batch_cmds, bundle_cmds

    parser = argparse.ArgumentParser(
        prog="napari-sam3-onnx",
        description="SAM 3 through ONNX Runtime: bundles, embeddings and batch segmentation.",
        epilog="exit codes: 0 ok, 1 handled error, 2 bad input, 130 interrupted (resumable). "
        "Run 'napari-sam3-onnx COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bundle_cmds.add_parsers(sub)
    batch_cmds.add_parsers(sub)
    auto_cmds.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 after a usage error, 0 after --help
        return int(exc.code or 0)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("\ninterrupted: finished slices are kept; run the same command again to resume.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except (InputError, PromptError, UnknownBundleError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (Sam3OnnxError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
