"""Sub-command ``propagate`` (and ``--repropagate``): objects carried through a stack.

Propagation walks both ways from its seeds, so its planes are not finished in order: the run
writes into a scratch ``.npy`` memmap beside ``--out`` (:func:`~.labels_run.scratch_labels`)
that is then streamed to ``--out`` plane by plane. The input is read plane by plane too, so no
whole stack (image or labels) is held in memory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .. import api
from ..api.io import InputError, image_names, parse_slices, planes_view
from ..api.jobs import StackJob, claim_names
from ..api.labels_files import write_labels
from ..api.provenance import Provenance, seeds_to_json
from ..api.validate import check_seeds
from ..models.errors import PromptError
from .guard import bundle_paths, check_store
from .labels_run import (
    _bundle,
    _counted_store,
    _labels_metadata,
    _one_input,
    _outputs,
    _record,
    _window,
    scratch_labels,
)
from .progress import Bar
from .replay_cmd import record_for
from .result_files import write_table
from .seed_args import build_seeds
from .signals import RunRecord


def _index_range(text: str | None, n: int) -> tuple[int, int] | None:
    rng = parse_slices(text)
    if rng is None:
        return None
    if rng.step not in (None, 1):
        raise InputError(f"--range {text}: propagation visits consecutive slices; leave out "
                         "the step.")
    start, stop, _ = rng.indices(n)
    if stop <= start:
        raise InputError(f"--range {text} selects no slice of the {n} (0 to {n - 1}).")
    return start, stop


def write_propagated(args: argparse.Namespace, labels: np.ndarray, meta: dict,
                      record: RunRecord, provenance: Provenance | None = None,
                      shape: tuple[int, ...] | None = None) -> None:
    """--out (and --table: object areas per slice) of a labels stack ``[Z, Y, X]``.

    ``shape``: the output's shape where it differs from the stack's (one plane: ``[Y, X]``).
    """
    write_labels(args.out, shape or labels.shape, iter(labels), replace=args.overwrite,
                 provenance=provenance, **meta)
    record.done("--out", args.out)
    if args.table is not None:
        rows = [{"label": oid, "index_0": z, "area_px": int(area)}
                for z in range(labels.shape[0])
                for oid, area in zip(*np.unique(labels[z], return_counts=True), strict=True)
                if oid != 0]
        write_table(args.table, ["label", "index_0", "area_px"], rows, replace=args.overwrite)
        record.done("--table", args.table)


def _cmd_repropagate(args: argparse.Namespace, path: Path) -> int:
    """--repropagate: ids of --seed-labels carried from --seed-slice; only they change."""
    if args.seed_labels is None or args.seed_slice is None:
        raise InputError("--repropagate needs --seed-labels (a labels stack shaped like the "
                         "input) and --seed-slice Z (the slice the ids are carried from).")
    if args.click or args.negative or args.box or args.fixed:
        raise InputError("--repropagate takes its seeds from --seed-labels on one 3-D stack: "
                         "leave out --click, --negative, --box and --fixed.")
    name = image_names([path])[0]
    job = StackJob(path, name, args.axis, args.rgb, _window(args), series=args.series)
    view = job.view()
    labels = planes_view(api.read_image(args.seed_labels), args.axis)
    index_range = _index_range(args.range, int(view.shape[0]))
    bundle = _bundle(args)
    record = _record(args, args.store)
    store = _counted_store(bundle, record, args.store)
    bar = Bar("propagate", quiet=args.quiet)
    with scratch_labels(args.out, labels.shape, labels.dtype) as scratch:
        try:
            out, result = api.repropagate(
                bundle, view, labels, args.seed_slice, args.ids, direction=args.direction,
                index_range=index_range, stop_after_absent=args.stop_after, rgb=args.rgb,
                window=job.window, store=store, image=name, progress=bar.update, out=scratch)
        finally:
            bar.close()
        write_propagated(args, out, _labels_metadata(args, path, view.ndim), record)
    ids = ", ".join(map(str, sorted(result.objects)))
    print(f"{result.method} re-propagation of label(s) {ids} from slice {args.seed_slice} -> "
          f"{args.out} (only these ids changed, on the slices reached).")
    return 0


def cmd_propagate(args: argparse.Namespace) -> int:
    """Carry seeded objects through the stack; labels to --out."""
    path = _one_input(args, "propagate")
    _outputs(args, path, [("seed labels", args.seed_labels)])
    if args.store is not None:
        check_store(args.store, [("input image", path), ("seed labels", args.seed_labels),
                                 *bundle_paths(args.bundle)])
    if args.repropagate:
        return _cmd_repropagate(args, path)
    name = image_names([path])[0]
    job = StackJob(path, name, args.axis, args.rgb, _window(args), series=args.series)
    view = job.view()
    seeds = getattr(args, "seeds", None) or build_seeds(args, view)  # replay gives them
    index_range = _index_range(args.range, int(view.shape[0]))
    plane = view.shape[1:3] if view.ndim >= 3 else view.shape
    try:
        check_seeds(seeds, int(view.shape[0]), plane, index_range)
    except PromptError as exc:
        raise PromptError(f"{exc} (--range {args.range})" if index_range else str(exc)) from None
    bundle = _bundle(args)
    record = _record(args, args.store)
    store = _counted_store(bundle, record, args.store)
    name = claim_names(store, [job])[0].image
    provenance = record_for(args, "propagate", bundle, path,
                            {"seeds": seeds_to_json(seeds)}, store=store)
    meta = _labels_metadata(args, path, view.ndim)
    if len(meta.get("axes", "")) != 3:
        meta.pop("axes", None)  # 4-D input propagated at one fixed index: 3-D labels
    bar = Bar("propagate", quiet=args.quiet)
    with scratch_labels(args.out, (int(view.shape[0]), *plane)) as scratch:
        try:
            labels, result = api.propagate(
                bundle, view, seeds, fixed=args.fixed or (), rgb=args.rgb, window=job.window,
                direction=args.direction, index_range=index_range,
                stop_after_absent=args.stop_after, store=store, image=name,
                progress=bar.update, out=scratch)
        finally:
            bar.close()
        write_propagated(args, labels, meta, record, provenance)
    stops = "; ".join(f"object {oid}: " + ", ".join(f"{d} stopped at {s.index} ({s.reason})"
                                                      for d, s in t.stops.items())
                      for oid, t in result.objects.items())
    note = (bundle.adapter.memory_graphs.memory_note if result.method == "memory"
            else "")
    print(f"{result.method} propagation of {len(seeds)} object(s) -> {args.out}. {stops}"
          + (f" Note: {note}." if note else ""))
    return 0


