"""Sub-commands that work on images: precompute, text, propagate."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import api
from ..api.io import InputError, expand_inputs, image_names, parse_slices, planes_view
from ..api.jobs import StackJob, claim_names
from ..api.metadata import KNOWN_AXES, image_axes, pixel_size
from ..api.provenance import Provenance, seeds_to_json, sidecar
from ..api.text import table_rows
from ..api.validate import check_seeds, check_window
from ..engine.concepts.search import parse_concepts
from ..models.base import Capability
from ..models.errors import PromptError
from . import args as _args
from .guard import bundle_paths, check_outputs, check_store
from .progress import Bar
from .replay_cmd import record_for
from .result_files import check_labels_path, write_labels, write_table
from .seed_args import build_seeds
from .signals import RunRecord


def _window(args: argparse.Namespace) -> tuple[float, float] | None:
    if args.window is None:
        return None
    try:
        return check_window(args.window)
    except InputError as exc:
        raise InputError(f"--window {args.window[0]:g} {args.window[1]:g}: "
                         f"{str(exc).split(': ', 1)[1]}") from None


def _bundle(args: argparse.Namespace) -> api.Bundle:
    return api.open_bundle(args.bundle, args.providers, args.threads or 0)


def _job(args: argparse.Namespace, path: Path, name: str) -> StackJob:
    job = StackJob(path, name, args.axis, args.rgb, _window(args), parse_slices(args.slices),
                   getattr(args, "series", None))
    job.indices()  # opens the file and checks its dimensionality and the slice range now
    return job


def _one_input(args: argparse.Namespace, command: str) -> Path:
    path = expand_inputs([args.input], skip=[getattr(args, "store", None)])
    if len(path) != 1:
        raise InputError(f"{args.input} holds {len(path)} images; give one file to "
                         f"'{command}'.")
    return path[0]


def _labels_metadata(args: argparse.Namespace, path: Path, ndim: int) -> dict:
    """``pixel_size`` and ``axes`` of the labels, from the input when it records them.

    The labels have the input's axes with the slice axis moved first (and no colour axis).
    When the slice axis is one of the plane's own axes the planes are other cuts through the
    data: then neither the pixel size nor the axis names carry over.
    """
    lead = ndim - (3 if args.rgb else 2)
    if lead > 0 and args.axis % ndim >= lead:
        return {}
    series = getattr(args, "series", None)
    meta: dict = {"pixel_size": pixel_size(path, series)}
    if lead == 0 or args.axis % ndim == 0:
        meta["like"] = path  # the input's own axis order: an OME-Zarr input lends its scale
    axes = image_axes(path, series)
    if axes is not None and len(axes) == ndim:
        axis = args.axis % ndim if lead else 0
        order = [axis] + [a for a in range(ndim) if a != axis] if lead else list(range(ndim))
        out = "".join(axes[a] for a in order)[: ndim - (1 if args.rgb else 0)]
        if out.endswith("YX") and len(set(out)) == len(out) and set(out) <= set(KNOWN_AXES):
            meta["axes"] = out
    return meta


def _need_distributed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise InputError("--workers and --scheduler need dask.distributed, which is not "
                         "installed: pip install 'napari-sam3-onnx[cluster]'.") from None


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


def _record(args: argparse.Namespace, store: Path | None, unit: str = "slice") -> RunRecord:
    record = getattr(args, "record", None) or RunRecord()
    record.store, record.unit = store, unit
    return record


def _counted_store(bundle: api.Bundle, record: RunRecord, path: Path | None):
    """The store opened for ``bundle``, counting the entries this run completes in ``record``."""
    if path is None:
        return None
    store = bundle.open_store(path)
    record.stored_since_open = lambda: store.writes  # counted once an entry is complete
    return store


def _stream(view_shape, results, n_lead):
    """Label planes in C order: the searched ones from ``results``, zeros elsewhere."""
    pending = next(results, None)
    for index in np.ndindex(*view_shape[:n_lead]):
        if pending is not None and tuple(pending[0]) == tuple(index):
            yield pending[1].labels
            pending = next(results, None)
        else:
            yield np.zeros(view_shape[n_lead:n_lead + 2], np.int32)


def _outputs(args: argparse.Namespace, path: Path, extra=()) -> None:
    """Check --out/--table before any work (see :mod:`.guard`) and note them as pending."""
    outputs = [("--out", check_labels_path(args.out)), ("--table", args.table)]
    side = [("--out's provenance", sidecar(args.out))] if args.out.suffix.lower() == ".npy" \
        else []  # the record of a .npy output goes beside it
    protected = [("input image", path), ("embedding store", args.store), *extra,
                 *bundle_paths(args.bundle)]
    check_outputs(outputs + side, protected, args.overwrite)
    _record(args, args.store).outputs(*outputs)


@dataclass
class LabelsRun:
    """What a command writing a labels stack (text, segment-all) has checked and opened."""

    path: Path
    job: StackJob
    view: Any
    bundle: api.Bundle
    record: RunRecord
    store: Any

    @property
    def n_lead(self) -> int:
        """Leading (slice) axes of the view."""
        return self.view.ndim - (3 if self.job.rgb else 2)


def open_labels_run(args: argparse.Namespace, command: str, need: Capability,
                    check: Callable[[api.Bundle], object] | None = None) -> LabelsRun:
    """Check the outputs and the store, open the input and the bundle: all before any work.

    ``check(bundle)`` runs before the store is opened (so a refusal leaves no store behind).
    """
    path = _one_input(args, command)
    _outputs(args, path)
    if args.store is not None:
        check_store(args.store, [("input image", path), *bundle_paths(args.bundle)])
    job = _job(args, path, image_names([path])[0])
    view = job.view()
    bundle = _bundle(args)
    bundle.adapter.require(need)
    if check is not None:
        check(bundle)
    record = _record(args, args.store, "tile" if args.tile else "slice")
    store = _counted_store(bundle, record, args.store)
    return LabelsRun(path, claim_names(store, [job])[0], view, bundle, record, store)


def write_labels_run(run: LabelsRun, args: argparse.Namespace, results: Iterator, bar: Bar,
                     columns: list[str], rows: list[dict],
                     provenance: Provenance | None = None) -> None:
    """Stream ``results`` (``(index, result)`` pairs) into --out, then ``rows`` into --table.

    ``provenance`` (:mod:`..api.provenance`) is written with the labels.
    """
    shape = run.view.shape[:-1] if run.job.rgb else run.view.shape
    try:
        write_labels(args.out, shape, _stream(shape, results, run.n_lead),
                     replace=args.overwrite, provenance=provenance,
                     **_labels_metadata(args, run.path, run.view.ndim))
    finally:
        bar.close()
    run.record.done("--out", args.out)
    if args.table is not None:
        write_table(args.table, columns, rows, replace=args.overwrite)
        run.record.done("--table", args.table)


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
    labels = np.asarray(planes_view(api.read_image(args.exemplars_from), args.axis))
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
    try:
        res = api.search_like(
            bundle, view, labels, args.exemplar_ids, args.negative_ids,
            others_negative=args.others_negative, concepts=phrases,
            through_stack=args.through_stack, window=job.window, floor=args.floor,
            min_area=args.min_area, link_iou=0.5 if args.link_iou is None else args.link_iou,
            store=store, image=job.image, progress=bar.update)
    finally:
        bar.close()
    stack = res.labels if res.labels.ndim == 3 else res.labels[None]
    _write_propagated(args, stack, _labels_metadata(args, path, view.ndim), record, provenance,
                      shape=res.labels.shape)
    how = f", carried through z ({res.method})" if res.method else ""
    print(f"{res.objects} object(s) like the exemplars on plane(s) "
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
        for index, res in api.iter_search_text(
            run.bundle, run.view, phrases, floor=args.floor, rgb=args.rgb, window=job.window,
            slices=job.slices, store=run.store, image=job.image, min_area=args.min_area,
            fill_holes=args.fill_holes, progress=bar.update, tile=args.tile,
            link_iou=args.link_iou,
        ):
            rows.extend(table_rows(res))
            yield index, res

    write_labels_run(run, args, iter(results()), bar, api.table_columns(run.n_lead), rows,
                     record)
    concepts = ", ".join(phrases)
    print(f"{len(rows)} instance(s) of {concepts!r} on {len(job.indices(run.view))} slice(s) -> "
          f"{args.out}" + (f", table {args.table}" if args.table else ""))
    return 0


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


def _write_propagated(args: argparse.Namespace, labels: np.ndarray, meta: dict,
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
    try:
        out, result = api.repropagate(
            bundle, view, labels, args.seed_slice, args.ids, direction=args.direction,
            index_range=index_range, stop_after_absent=args.stop_after, rgb=args.rgb,
            window=job.window, store=store, image=name, progress=bar.update)
    finally:
        bar.close()
    _write_propagated(args, out.astype(np.int32), _labels_metadata(args, path, view.ndim),
                      record)
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
    bar = Bar("propagate", quiet=args.quiet)
    try:
        labels, result = api.propagate(
            bundle, view, seeds, fixed=args.fixed or (), rgb=args.rgb, window=job.window,
            direction=args.direction, index_range=index_range, stop_after_absent=args.stop_after,
            store=store, image=name, progress=bar.update)
    finally:
        bar.close()
    meta = _labels_metadata(args, path, view.ndim)
    if len(meta.get("axes", "")) != labels.ndim:
        meta.pop("axes", None)  # 4-D input propagated at one fixed index: 3-D labels
    _write_propagated(args, labels, meta, record, provenance)
    stops = "; ".join(f"object {oid}: " + ", ".join(f"{d} stopped at {s.index} ({s.reason})"
                                                      for d, s in t.stops.items())
                      for oid, t in result.objects.items())
    note = (bundle.adapter.memory_graphs.memory_note if result.method == "memory"
            else "")
    print(f"{result.method} propagation of {len(seeds)} object(s) -> {args.out}. {stops}"
          + (f" Note: {note}." if note else ""))
    return 0


def add_parsers(sub) -> None:
    """Register precompute, text and propagate."""
    _args.add_parsers(sub, {"precompute": cmd_precompute, "text": cmd_text,
                            "propagate": cmd_propagate})
