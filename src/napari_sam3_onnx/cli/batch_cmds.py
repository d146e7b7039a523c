"""Sub-commands that work on images: precompute and text (propagate: :mod:`.propagate_cmd`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import api
from ..api.io import InputError, expand_inputs, image_names, planes_view
from ..api.text import table_columns, table_rows
from ..engine.concepts.search import parse_concepts
from ..models.base import Capability
from . import args as _args
from .guard import bundle_paths, check_store
from .labels_run import (
    _bundle,
    _counted_store,
    _job,
    _labels_metadata,
    _need_distributed,
    _one_input,
    _outputs,
    _record,
    open_labels_run,
    scratch_labels,
    write_labels_run,
)
from .progress import Bar
from .propagate_cmd import cmd_propagate, write_propagated
from .replay_cmd import record_for


def cmd_precompute(args: argparse.Namespace) -> int:
    """Encode every plane of the inputs into the store (resumable)."""
    paths = expand_inputs(args.inputs, skip=[args.store])
    check_store(args.store, [*(("input image", p) for p in paths), *bundle_paths(args.bundle)])
    if (args.scheduler or args.workers) and args.tile:
        raise InputError("--tile runs in this process: leave out --workers/--scheduler.")
    if args.scheduler or args.workers:
        _need_distributed()
    jobs = [_job(args, p, n) for p, n in zip(paths, image_names(paths), strict=True)]
    bundle = _bundle(args)
    precision = "fp16" if args.fp16 else ("fp32" if args.fp32 else None)
    unit = "tile" if args.tile else "slice"
    record = _record(args, args.store, unit)
    client = None
    if args.scheduler or args.workers:
        from ..api.cluster import make_client

        client = make_client(args.scheduler, args.workers, processes=not args.no_processes)
    bar = Bar("encode", unit=unit, quiet=args.quiet)

    def progress(done: int, total: int) -> None:
        record.stored = done
        bar.update(done, total)

    try:
        report = api.precompute(bundle, jobs, args.store, precision=precision,
                                progress=progress, client=client, tile=args.tile,
                                replace_store=args.replace_store)
    finally:
        bar.close()
        if client is not None:
            from ..api.cluster import close_client

            close_client(client)
    planes = sum(len(j.indices()) for j in jobs)
    what = f"{report.total} tiles of {planes} slices" if args.tile else f"{report.total} slices"
    repaired = f" ({report.repaired} replaced broken entries)" if report.repaired else ""
    print(f"encoded {report.encoded}{repaired}, skipped {report.skipped} (already in the store) "
          f"of {what} from {len(jobs)} image(s) -> {args.store}")
    return 0


def _cmd_text_exemplars(args: argparse.Namespace) -> int:
    """--exemplars-from: SAM 3's exemplar search from labels (:func:`api.search_like`)."""
    path = _one_input(args, "text")
    _outputs(args, path, [("exemplar labels", args.exemplars_from)])
    if args.store is not None:
        check_store(args.store, [("input image", path), ("exemplar labels", args.exemplars_from)])
    if args.rgb or args.slices or args.tile:
        raise InputError("--exemplars-from takes one gray image or 3-D stack: leave out --rgb, "
                         "--slices and --tile.")
    job = _job(args, path, image_names([path])[0])
    view = job.view()
    labels = planes_view(api.read_image(args.exemplars_from), args.axis)  # read per plane
    phrases = parse_concepts(args.concepts) if args.concepts else []
    bundle = _bundle(args)
    bundle.adapter.require(Capability.EXEMPLARS)
    if phrases:
        bundle.texts  # noqa: B018 - the tokenizer is read now, before anything is written
    record = _record(args, args.store)
    store = _counted_store(bundle, record, args.store)
    provenance = record_for(args, "text", bundle, path, {
        "concepts": phrases, "exemplars_from": str(Path(args.exemplars_from).resolve())},
        store=store)
    bar = Bar("search", quiet=args.quiet)
    # the labels fill a scratch memmap (linking rewrites planes) and stream to --out
    with scratch_labels(args.out, tuple(view.shape)) as scratch:
        try:
            res = api.search_like(
                bundle, view, labels, args.exemplar_ids, args.negative_ids,
                others_negative=args.others_negative, concepts=phrases,
                through_stack=args.through_stack, window=job.window, floor=args.floor,
                min_area=args.min_area, link_iou=0.5 if args.link_iou is None else args.link_iou,
                store=store, image=job.image, progress=bar.update, out=scratch)
        finally:
            bar.close()
        stack = res.labels if res.labels.ndim == 3 else res.labels[None]
        write_propagated(args, stack, _labels_metadata(args, path, view.ndim), record,
                          provenance, shape=res.labels.shape)
        objects = res.objects
    how = f", carried through z ({res.method})" if res.method else ""
    print(f"{objects} object(s) like the exemplars on plane(s) "
          f"{', '.join(map(str, res.planes))}{how} -> {args.out}"
          + "".join(f"\nNote: {n}" for n in res.notes))
    return 0


def cmd_text(args: argparse.Namespace) -> int:
    """Find every instance of the concepts; labels to --out, instances to --table."""
    if args.exemplars_from is not None:
        return _cmd_text_exemplars(args)
    if not args.concepts:
        raise InputError("Give --concepts (e.g. 'nucleus, cell') or --exemplars-from LABELS.")
    phrases = parse_concepts(args.concepts)
    # the tokenizer is read now: a missing one fails before anything is encoded or created
    run = open_labels_run(args, "text", Capability.TEXT, check=lambda bundle: bundle.texts)
    rows: list[dict] = []
    bar = Bar("search", quiet=args.quiet)
    job = run.job
    record = record_for(args, "text", run.bundle, run.path, {"concepts": phrases},
                        job.indices(run.view), store=run.store)

    def results():
        for step in api.iter_search(
            run.workspace(args.tile), run.refs(), phrases, floor=args.floor,
            min_area=args.min_area, fill_holes=args.fill_holes, link_iou=args.link_iou,
        ):
            bar.update(step.done, step.total)
            rows.extend(table_rows(step.result))
            yield step.index, step.result

    write_labels_run(run, args, iter(results()), bar, table_columns(run.n_lead), rows, record)
    concepts = ", ".join(phrases)
    print(f"{len(rows)} instance(s) of {concepts!r} on {len(job.indices(run.view))} slice(s) -> "
          f"{args.out}" + (f", table {args.table}" if args.table else ""))
    return 0


def add_parsers(sub) -> None:
    """Register precompute, text and propagate."""
    _args.add_parsers(sub, {"precompute": cmd_precompute, "text": cmd_text,
                            "propagate": cmd_propagate})
