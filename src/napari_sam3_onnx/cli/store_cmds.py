"""Sub-commands about embedding stores: ``store verify STORE [--repair]``."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from .. import api
from ..api.io import InputError
from ..engine.store.embedding_store import StoreError
from ..engine.store.verify import EntryState

#: ``store verify`` exit codes.
EXIT_ALL_OK, EXIT_BROKEN, EXIT_NOT_A_STORE = 0, 1, 2


def cmd_verify(args: argparse.Namespace) -> int:
    """Print every entry's state and a summary; with --repair remove the broken entries."""
    try:
        report = api.verify_store(args.store, repair=args.repair)
    except StoreError as exc:  # not a store: bad input (exit 2)
        raise InputError(str(exc)) from exc
    width = max(len(s.value) for s in EntryState)
    for entry in report.entries:
        detail = f"  ({entry.detail})" if entry.detail else ""
        print(f"{entry.state.value:<{width}}  {entry.path}{detail}")
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in EntryState)
    print(f"{len(report.entries)} entries in {args.store} ({report.identity}): {counts}")
    if args.repair:
        if report.removed:
            print(f"removed {report.removed} broken entries; the next precompute (or any "
                  "command given this --store) encodes those slices again.")
        return EXIT_ALL_OK if report.removed == report.broken else EXIT_BROKEN
    if report.broken:
        print(f"{report.broken} entries are not ok (they are never used as features); run "
              f"'napari-sam3-onnx store verify {args.store} --repair' to remove them.")
        return EXIT_BROKEN
    return EXIT_ALL_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``store`` and its action ``verify``."""
    p = sub.add_parser("store", help="check an embedding store (store verify STORE)")
    actions = p.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    v = actions.add_parser(
        "verify", help="report every entry's state; --repair removes the broken ones",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Read every entry of the store and check it against the bundle and precision "
            "recorded in the store and against its arrays' checksums. Each entry is ok, "
            "incomplete (never finished: an interrupted writer), corrupt (a lost chunk, a "
            "flipped byte, damaged metadata) or foreign bundle (made with another bundle or "
            "precision). Broken entries are never served as features; --repair removes them so "
            "that the next run encodes them again. Do not repair while another process writes "
            "into the store.", 78),
        epilog="exit codes: 0 every entry ok (with --repair: every broken one removed), "
        "1 broken entries remain, 2 not an embedding store.\n"
        "example:\n  napari-sam3-onnx store verify emb.zarr --repair")
    v.add_argument("store", type=Path, help="the zarr store (OUT.zarr)")
    v.add_argument("--repair", action="store_true", help="remove the entries that are not ok")
    v.set_defaults(func=cmd_verify)
