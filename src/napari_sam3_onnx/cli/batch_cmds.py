"""Sub-commands that work on images: precompute, text, propagate."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import numpy as np

from .. import api
from ..api.io import InputError, expand_inputs, image_names, parse_slices
from ..api.jobs import StackJob
from ..api.text import table_rows
from ..engine.concepts import parse_concepts
from ..models.base import Capability
from .output import Bar, check_labels_path, write_labels, write_table
from .seeds import add_seed_args, build_seeds

FMT = argparse.RawDescriptionHelpFormatter


def _window(args: argparse.Namespace) -> tuple[float, float] | None:
    if args.window is None:
        return None
    lo, hi = args.window
    if not hi > lo:
        raise InputError(f"--window {lo} {hi}: the upper limit must be above the lower one.")
    return float(lo), float(hi)


def _bundle(args: argparse.Namespace) -> api.Bundle:
    return api.open_bundle(args.bundle, args.providers, args.threads)


def _job(args: argparse.Namespace, path: Path, name: str) -> StackJob:
    job = StackJob(path, name, args.axis, args.rgb, _window(args), parse_slices(args.slices))
    job.indices()  # opens the file and checks its dimensionality and the slice range now
    return job


def cmd_precompute(args: argparse.Namespace) -> int:
    """Encode every plane of the inputs into the store (resumable)."""
    paths = expand_inputs(args.inputs)
    jobs = [_job(args, p, n) for p, n in zip(paths, image_names(paths), strict=True)]
    bundle = _bundle(args)
    precision = "fp16" if args.fp16 else ("fp32" if args.fp32 else None)
    client = None
    if (args.scheduler or args.workers) and args.tile:
        raise InputError("--tile runs in this process: leave out --workers/--scheduler.")
    if args.scheduler or args.workers:
        from ..api.cluster import make_client

        client = make_client(args.scheduler, args.workers, processes=not args.no_processes)
    bar = Bar("encode")
    try:
        report = api.precompute(bundle, jobs, args.store, precision=precision,
                                progress=bar.update, client=client, tile=args.tile,
                                replace_store=args.replace_store)
    finally:
        bar.close()
        if client is not None:
            from ..api.cluster import close_client

            close_client(client)
    repaired = f" ({report.repaired} replaced broken entries)" if report.repaired else ""
    print(f"encoded {report.encoded}{repaired}, skipped {report.skipped} (already in the store) "
          f"of {report.total} slices from {len(jobs)} image(s) -> {args.store}")
    return 0


def _stream(view_shape, results, n_lead):
    """Label planes in C order: the searched ones from ``results``, zeros elsewhere."""
    pending = next(results, None)
    for index in np.ndindex(*view_shape[:n_lead]):
        if pending is not None and tuple(pending[0]) == tuple(index):
            yield pending[1].labels
            pending = next(results, None)
        else:
            yield np.zeros(view_shape[n_lead:n_lead + 2], np.int32)


def cmd_text(args: argparse.Namespace) -> int:
    """Find every instance of the concepts; labels to --out, instances to --table."""
    phrases = parse_concepts(args.concepts)
    out = check_labels_path(args.out)
    path = expand_inputs([args.input])
    if len(path) != 1:
        raise InputError(f"{args.input} holds {len(path)} images; give one file to 'text'.")
    job = _job(args, path[0], image_names(path)[0])
    view = job.view()
    bundle = _bundle(args)
    bundle.adapter._require(Capability.TEXT)
    bundle.texts  # noqa: B018 -- fail now, not after encoding, when the tokenizer is missing
    n_lead = view.ndim - (3 if args.rgb else 2)
    rows: list[dict] = []
    bar = Bar("search")

    def results():
        for index, res in api.iter_search_text(
            bundle, view, phrases, floor=args.floor, rgb=args.rgb, window=job.window,
            slices=job.slices, store=args.store, image=job.image, min_area=args.min_area,
            fill_holes=args.fill_holes, progress=bar.update, tile=args.tile,
        ):
            rows.extend(table_rows(res))
            yield index, res

    shape = view.shape[:-1] if args.rgb else view.shape
    try:
        write_labels(out, shape, _stream(shape, iter(results()), n_lead))
    finally:
        bar.close()
    if args.table is not None:
        write_table(args.table, api.table_columns(n_lead), rows)
    concepts = ", ".join(phrases)
    print(f"{len(rows)} instance(s) of {concepts!r} on {len(job.indices(view))} slice(s) -> "
          f"{out}" + (f", table {args.table}" if args.table else ""))
    return 0


def cmd_propagate(args: argparse.Namespace) -> int:
    """Carry seeded objects through the stack; labels to --out."""
    out = check_labels_path(args.out)
    path = expand_inputs([args.input])
    if len(path) != 1:
        raise InputError(f"{args.input} holds {len(path)} images; give one file to 'propagate'.")
    name = image_names(path)[0]
    job = StackJob(path[0], name, args.axis, args.rgb, _window(args))
    view = job.view()
    seeds = build_seeds(args, view)
    rng = parse_slices(args.range)
    index_range = None
    if rng is not None:
        start, stop, _ = rng.indices(view.shape[0])
        index_range = (start, stop)
    bundle = _bundle(args)
    bar = Bar("propagate")
    try:
        labels, result = api.propagate(
            bundle, view, seeds, fixed=args.fixed or (), rgb=args.rgb, window=job.window,
            direction=args.direction, index_range=index_range, stop_after_absent=args.stop_after,
            store=args.store, image=name, progress=bar.update)
    finally:
        bar.close()
    write_labels(out, labels.shape, iter(labels))
    if args.table is not None:
        rows = [{"label": oid, "index_0": z, "area_px": int(area)}
                for z in range(labels.shape[0])
                for oid, area in zip(*np.unique(labels[z], return_counts=True), strict=True)
                if oid != 0]
        write_table(args.table, ["label", "index_0", "area_px"], rows)
    stops = "; ".join(f"object {oid}: " + ", ".join(f"{d} stopped at {s.index} ({s.reason})"
                                                      for d, s in t.stops.items())
                      for oid, t in result.objects.items())
    note = bundle.adapter.memory_note if result.method == "memory" else ""
    print(f"{result.method} propagation of {len(seeds)} object(s) -> {out}. {stops}"
          + (f" Note: {note}." if note else ""))
    return 0


def _image_args(p: argparse.ArgumentParser, slices: bool = True) -> None:
    p.add_argument("--axis", type=int, default=0,
                   help="the slice axis (default 0); it is moved to the front of the output")
    p.add_argument("--window", type=float, nargs=2, metavar=("LO", "HI"),
                   help="contrast window mapped to 0..255 (default: uint8 as is, otherwise each "
                   "slice's min..max); use the window you view the data with")
    p.add_argument("--rgb", action="store_true", help="the last axis holds RGB(A) channels")
    if slices:
        p.add_argument("--slices", metavar="A:B", help="only these positions along the slice "
                       "axis, Python-style (e.g. 0:10, 5, -3:)")
    p.add_argument("--providers", default="auto",
                   help="onnxruntime execution provider: auto, cpu, cuda, coreml, dml")
    p.add_argument("--threads", type=int, default=0,
                   help="threads per operator (default 0: onnxruntime's choice)")


def _tile_size(text: str) -> int:
    if not text.isdigit() or int(text) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give a tile side of 2 pixels or more")
    return int(text)


def _tile_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tile", type=_tile_size, metavar="SIZE",
                   help="cut planes longer than SIZE px into SIZE-px tiles (a quarter overlap), "
                   "each encoded at full resolution; see docs/large-images.md")


def _wrap(text: str) -> str:
    """Wrap a help description to 78 columns, keeping explicit line breaks."""
    return "\n".join(textwrap.fill(line, 78) for line in text.split("\n"))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register precompute, text and propagate."""
    p = sub.add_parser(
        "precompute", help="encode stacks once into a zarr embedding store", formatter_class=FMT,
        description=_wrap(
        "Encode every slice of the inputs with the bundle's image encoder and write "
        "the embeddings into a zarr store, one signed entry per slice. Entries already complete "
        "for the same data, window, bundle and precision are skipped, so an interrupted run "
        "(Ctrl+C, a lost job) resumes where it stopped. The widget and the other commands read "
        "the store (--store) instead of encoding again."),
        epilog="examples:\n  napari-sam3-onnx precompute hf-tracker stack.tif --store emb.zarr "
        "--window 500 4000\n  napari-sam3-onnx precompute hf-tracker data/ --store emb.zarr "
        "--workers 4 --fp16")
    p.add_argument("bundle", help="bundle id (see 'list') or a bundle folder")
    p.add_argument("inputs", nargs="+", type=Path,
                   help="TIFF, .npy or zarr/OME-Zarr images, or folders of them")
    p.add_argument("--store", type=Path, required=True, help="the zarr store to fill (OUT.zarr)")
    prec = p.add_mutually_exclusive_group()
    prec.add_argument("--fp16", action="store_true", help="store features as float16 (half size)")
    prec.add_argument("--fp32", action="store_true", help="store float32 (default for new stores)")
    p.add_argument("--replace-store", action="store_true",
                   help="if --store was made for another bundle or precision, delete its "
                   "entries and fill it for this one (without it such a store is refused)")
    _image_args(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="N",
                       help="encode on a local dask cluster of N one-thread workers")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="encode on a running dask.distributed scheduler (tcp://host:8786)")
    p.add_argument("--no-processes", action="store_true",
                   help="with --workers: threads in this process instead of worker processes")
    _tile_arg(p)
    p.set_defaults(func=cmd_precompute)

    p = sub.add_parser(
        "text", help="find every instance of text concepts on a stack", formatter_class=FMT,
        description=_wrap("Search each slice for the concepts (SAM 3's detector with the language "
        "encoder) and write an int32 labels stack (instance ids unique over the stack; zeros on "
        "slices not searched) and, with --table, one CSV row per instance: label, concept, "
        "score, area_px, index_0.. (position along the slice axis, then other leading axes), "
        "bbox_row0, bbox_col0, bbox_row1, bbox_col1 (inclusive pixel bounds)."),
        epilog="example:\n  napari-sam3-onnx text wkentaro-v0.3 stack.tif --concepts "
        "'nucleus, cell' --out labels.tif --table instances.csv --store emb.zarr")
    p.add_argument("bundle", help="bundle id or folder (needs the 'text' capability)")
    p.add_argument("input", type=Path, help="one TIFF, .npy or zarr/OME-Zarr image")
    p.add_argument("--concepts", required=True,
                   help="comma-separated phrases, e.g. 'nucleus, cell'")
    p.add_argument("--out", type=Path, required=True, help="labels file: .tif, .npy or .zarr")
    p.add_argument("--table", type=Path, help="CSV file with one row per instance")
    p.add_argument("--floor", type=float, default=0.5, help="keep scores above this (default 0.5)")
    p.add_argument("--min-area", type=int, default=0, help="drop instances with fewer pixels")
    p.add_argument("--fill-holes", action="store_true", help="fill holes inside instances")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    _tile_arg(p)
    _image_args(p)
    p.set_defaults(func=cmd_text)

    p = sub.add_parser(
        "propagate", help="carry objects through z or t from seed clicks, boxes or masks",
        formatter_class=FMT,
        description=_wrap("Propagate objects from their seed slices through the stack with SAM 3's "
        "video memory (bundles with 'memory') or by prompt carry-over (click bundles), forward "
        "and backward, and write an int32 labels stack (value = object id) along the slice axis."),
        epilog="example:\n  napari-sam3-onnx propagate pagarcia-tracker stack.tif --click 1 5 "
        "40 61 --click 2 5 12 30 --out tracks.tif --store emb.zarr")
    p.add_argument("bundle", help="bundle id or folder (needs 'clicks')")
    p.add_argument("input", type=Path, help="one TIFF, .npy or zarr/OME-Zarr stack")
    p.add_argument("--out", type=Path, required=True, help="labels file: .tif, .npy or .zarr")
    add_seed_args(p)
    p.add_argument("--direction", choices=("both", "forward", "backward"), default="both")
    p.add_argument("--range", metavar="A:B", help="only visit these slices")
    p.add_argument("--stop-after", type=int, default=2,
                   help="stop an object after N slices without it (default 2)")
    p.add_argument("--fixed", type=int, nargs="+", metavar="I",
                   help="for 4-D data: index of the other leading axis (e.g. the time point)")
    p.add_argument("--table", type=Path, help="CSV of object areas per slice")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    _image_args(p, slices=False)
    p.set_defaults(func=cmd_propagate)
