"""Command line: bundles, embeddings and batch segmentation without napari.

Sub-commands: ``list``, ``fetch``, ``inspect``, ``doctor`` (bundles and runtime), ``convert``
(int8 in this CPU's format from a bundle's fp32 graphs, :mod:`.convert_cmd`),
``precompute`` (encode stacks into a zarr embedding store, optionally on a dask cluster),
``text`` (concept search to a labels stack and a CSV table), ``propagate`` (carry seeded
objects through z or t; ``--repropagate`` for labels already there), ``refine`` (fix one
label of a labels file with clicks), ``segment-all``, ``evaluate``, ``replay`` (run a labels
output's recorded prompts again, :mod:`.replay_cmd`) and ``store verify`` (check, and repair,
an embedding store). Each has ``--help``. All of them call :mod:`napari_sam3_onnx.api`.

Exit codes: 0 success; 1 a handled error (a missing or damaged model file, a bundle that cannot
do what was asked, a checksum mismatch, an unexpected failure, still reported in one line); 2 bad
input (an unreadable or wrongly shaped image, an unknown bundle id, a bad option or prompt, an
output that exists without --overwrite or would replace an input, or a failed download); 128 +
the signal number when interrupted: 130 Ctrl+C, 143 SIGTERM, 129 SIGHUP (finished store entries
are kept, partial outputs deleted: run the same command again to resume).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

# only light modules at import: the signal handlers go in before numpy, zarr and onnxruntime
# load, so a SIGTERM or Ctrl+C in the first second is a clean interruption too
from .signals import RunRecord, exit_code, interruption, signals_as_interrupt

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-command per task."""
    from . import (
        auto_cmds,
        batch_cmds,
        bundle_cmds,
        convert_cmd,
        label_cmds,
        replay_cmd,
        store_cmds,
    )

    parser = argparse.ArgumentParser(
        prog="napari-sam3-onnx",
        description="SAM 3 through ONNX Runtime: bundles, embeddings and batch segmentation.",
        epilog="exit codes: 0 ok, 1 handled error, 2 bad input, 130 Ctrl+C, 143 SIGTERM, "
        "129 SIGHUP (interrupted: finished store entries kept, partial outputs deleted). "
        "Run 'napari-sam3-onnx COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bundle_cmds.add_parsers(sub)
    batch_cmds.add_parsers(sub)
    store_cmds.add_parsers(sub)
    auto_cmds.add_parsers(sub)
    label_cmds.add_parsers(sub)
    replay_cmd.add_parsers(sub)
    convert_cmd.add_parsers(sub)
    for command in sub.choices.values():  # progress bars draw only on a terminal anyway
        command.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
        command.set_defaults(parser=parser)  # replay parses a recorded command line with it
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (see the module docstring)."""
    record = RunRecord()
    with signals_as_interrupt(), warnings.catch_warnings():  # before any heavy import
        warnings.showwarning = _warn_line
        try:
            return _run(argv, record)
        except KeyboardInterrupt as exc:  # Ctrl+C, or SIGTERM / SIGHUP (signals.Terminated)
            return _interrupted(exc, record)
        except Exception as exc:  # an interrupted import (or a failure in the imports)
            stop = interruption(exc)
            if stop is not None:
                return _interrupted(stop, record)
            if os.environ.get(DEBUG_ENV):
                raise
            print(f"error: {type(exc).__name__}: {_one_line(exc)} (unexpected; set {DEBUG_ENV}"
                  "=1 for the traceback and please report it)", file=sys.stderr)
            return EXIT_ERROR


def _interrupted(exc: KeyboardInterrupt, record: RunRecord) -> int:
    """Say what an interrupted run kept, once zarr's background I/O has stopped."""
    if "zarr" in sys.modules:
        from ..engine.store.files import settle_io

        settle_io()
    what = getattr(exc, "name", "Ctrl+C")
    print(f"\ninterrupted ({what}): {record.kept()}", file=sys.stderr)
    return exit_code(exc)


def _run(argv: Sequence[str] | None, record: RunRecord) -> int:
    """Parse ``argv`` and run the command; every error but an interruption becomes one line."""
    from ..api.io import InputError
    from ..models.errors import PromptError, Sam3OnnxError
    from ..models.registry import UnknownBundleError

    parser = build_parser()
    try:
        args = parser.parse_args(_joined_values(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: 2 after a usage error, 0 after --help
        return int(exc.code or 0)
    args.record = record
    try:
        return int(args.func(args))
    except (InputError, PromptError, UnknownBundleError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (Sam3OnnxError, OSError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug or an unforeseen input: still one line, never a traceback
        if os.environ.get(DEBUG_ENV) or interruption(exc) is not None:
            raise
        print(f"error: {type(exc).__name__}: {_one_line(exc)} (unexpected; set {DEBUG_ENV}=1 "
              "for the traceback and please report it)", file=sys.stderr)
        return EXIT_ERROR


#: Options whose value may start with ``-`` (``--slices -3:``): argparse would take such a
#: value for an option of its own and say "expected one argument".
DASH_VALUES = ("--slices", "--range")


def _joined_values(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--slices -3:`` written as ``--slices=-3:`` (the same for --range)."""
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = str(items[i])
        nxt = str(items[i + 1]) if i + 1 < len(items) else ""
        if item in DASH_VALUES and nxt.startswith("-") and nxt[1:2].isdigit():
            out.append(f"{item}={nxt}")
            i += 2
            continue
        out.append(item)
        i += 1
    return out


#: Set to 1 to let an unexpected error's traceback through.
DEBUG_ENV = "NAPARI_SAM3_ONNX_DEBUG"


def _warn_line(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one ``warning: ...`` line on stderr (no file name and source line)."""
    print(f"warning: {_one_line(message)}", file=sys.stderr)


def _one_line(exc: BaseException | Warning | str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:600]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
