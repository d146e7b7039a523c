"""Sub-commands ``segment-all`` (automatic instance segmentation) and ``evaluate``."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

from .. import api
from ..api.automatic import auto_table_columns
from ..api.automatic_files import FileOptions, iter_segment_files
from ..api.automatic_tracked import segment_all_tracked
from ..api.io import InputError, expand_inputs, image_names, parse_slices
from ..api.labels_files import write_labels
from ..engine.automatic import AutoMaskSettings
from ..engine.automatic.linking import LINK_IOU
from ..models.base import Capability
from .args import FMT, _image_args, _tile_arg, _wrap, finite, link_iou, whole
from .guard import bundle_paths, check_not_protected, check_outputs, check_store
from .labels_run import (
    _bundle,
    _labels_metadata,
    _need_distributed,
    _window,
    open_labels_run,
    scratch_labels,
    write_labels_run,
)
from .progress import Bar
from .replay_cmd import record_for
from .result_files import write_table
from .series_skip import add_skip_done, skip_done

#: Options named as SAM's ``SamAutomaticMaskGenerator`` arguments (``--points-per-side``, ...).
SAM_OPTIONS = (("points_per_side", int), ("points_per_batch", int), ("pred_iou_thresh", finite),
               ("stability_score_thresh", finite), ("stability_score_offset", finite),
               ("box_nms_thresh", finite), ("crop_n_layers", int), ("crop_nms_thresh", finite),
               ("crop_overlap_ratio", finite), ("crop_n_points_downscale_factor", int),
               ("min_mask_region_area", int))


def _provenance(args: argparse.Namespace, bundle: api.Bundle, path: Path,
                settings: AutoMaskSettings, planes=(), store=None):
    """The record of one labels output: the automatic-mask options as resolved."""
    more = {name: getattr(settings, name) for name, _ in SAM_OPTIONS}
    return record_for(args, "segment-all", bundle, path, {}, planes, more, store)


def _settings(args: argparse.Namespace) -> AutoMaskSettings:
    given = {name: getattr(args, name) for name, _ in SAM_OPTIONS
             if getattr(args, name) is not None}
    try:
        return AutoMaskSettings(**given)
    except ValueError as exc:
        raise InputError(str(exc)) from exc


def cmd_segment_all(args: argparse.Namespace) -> int:
    """Automatic masks on every slice; labels to --out, objects to --table."""
    settings = _settings(args)
    paths = expand_inputs(args.inputs, skip=[args.store])
    many = len(paths) > 1 or args.workers or args.scheduler or args.skip_done
    if args.propagate_from is not None and (many or args.rgb or args.slices):
        raise InputError("--propagate-from takes one gray 3-D stack: leave out --workers, "
                         "--scheduler, --rgb and --slices.")
    if many:
        return _segment_files(args, paths, settings)
    args.input = paths[0]
    run = open_labels_run(args, "segment-all", Capability.CLICKS)
    if args.propagate_from is not None:
        return _segment_tracked(args, run, settings)
    rows: list[dict] = []
    bar = Bar("segment", quiet=args.quiet)
    link = None if args.no_link else args.link_iou
    job = run.job
    record = _provenance(args, run.bundle, run.path, settings, job.indices(run.view), run.store)

    def results():
        for step in api.iter_segment_all(run.workspace(args.tile), run.refs(),
                                         settings=settings, link_iou=link):
            bar.update(step.done, step.total)
            rows.extend(api.automatic.auto_table_rows(step.result))
            yield step.index, step.result

    write_labels_run(run, args, iter(results()), bar, auto_table_columns(run.n_lead), rows,
                     record)
    objects = len({r["label"] for r in rows})
    print(f"{objects} object(s) on {len(job.indices(run.view))} slice(s) -> {args.out}"
          + (f", table {args.table}" if args.table else ""))
    return 0


def _segment_tracked(args: argparse.Namespace, run, settings: AutoMaskSettings) -> int:
    """--propagate-from Z: the key plane's objects carried through the stack (one id through z)."""
    bar = Bar("propagate", quiet=args.quiet)
    job = run.job
    record = _provenance(args, run.bundle, run.path, settings, store=run.store)
    with scratch_labels(args.out, run.view.shape) as scratch:  # filled out of order
        res = segment_all_tracked(run.bundle, run.view, key=args.propagate_from,
                                  settings=settings, window=job.window, store=run.store,
                                  image=job.image, tile=args.tile, progress=bar.update,
                                  out=scratch)
        rows = sorted(res.table, key=lambda r: (r["index_0"], r["label"]))

        def results():
            for z in range(res.labels.shape[0]):
                yield (z,), SimpleNamespace(labels=res.labels[z])

        write_labels_run(run, args, iter(results()), bar, auto_table_columns(1), rows, record)
    method = res.propagation.method if res.propagation is not None else "nothing to carry"
    print(f"{len(res.rows)} object(s) found on slice {res.key}, carried through "
          f"{res.labels.shape[0]} slice(s) ({method}) -> {args.out}"
          + (f", table {args.table}" if args.table else ""))
    return 0


def _file_outputs(args: argparse.Namespace, paths: list[Path], names: list[str]) -> list[Path]:
    """``--out`` as a folder (created if missing): ``OUT/<image name>.tif`` per input, checked."""
    out = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: with several images (or --workers/--scheduler) --out "
                         "is a folder that gets one labels file per image; this is a file.")
    if args.table is not None and args.table.is_dir():
        raise InputError(f"--table {args.table}: give a CSV file (one table for every image).")
    targets = [out / f"{n}.tif" for n in names]
    inputs = [*(("input image", p) for p in paths), *bundle_paths(args.bundle)]
    protected = [*inputs, ("embedding store", args.store)]
    check_not_protected("--out", out, protected)
    if not out.exists():
        if not out.parent.is_dir():
            raise InputError(f"--out {out}: the folder {out.parent} does not exist.")
        out.mkdir()
    outputs = [*(("--out", t) for t in targets), ("--table", args.table)]
    check_outputs(outputs, protected, args.overwrite)
    if args.store is not None:
        check_store(args.store, inputs)
    return targets


def _segment_files(args: argparse.Namespace, paths: list[Path],
                   settings: AutoMaskSettings) -> int:
    """Many images (or a cluster): one labels file per image in --out, one --table for all."""
    if (args.scheduler or args.workers) and args.tile:
        raise InputError("--tile runs in this process: leave out --workers/--scheduler.")
    if args.scheduler or args.workers:
        _need_distributed()
    names = image_names(paths)
    paths, names, marks = skip_done(args, paths, names)
    if not paths:
        print(f"every image is done already -> {args.out}")
        return 0
    targets = _file_outputs(args, paths, names)
    bundle = _bundle(args)
    bundle.adapter.require(Capability.CLICKS)
    opts = FileOptions(settings, args.axis, args.rgb, _window(args), parse_slices(args.slices),
                       None if args.no_link else args.link_iou, args.tile)
    client = None
    if args.scheduler or args.workers:
        from ..api.cluster import make_client

        client = make_client(args.scheduler, args.workers, processes=not args.no_processes)
    records = [_provenance(args, bundle, p, settings) for p in paths]
    bar = Bar("segment", unit="image", quiet=args.quiet)
    rows: list[dict] = []
    n_lead = 0
    try:
        for done, res in enumerate(iter_segment_files(bundle, paths, names, opts,
                                                      store=args.store, client=client), 1):
            labels = res.labels
            n_lead = max(n_lead, labels.ndim - 2)
            planes = labels.reshape(-1, *labels.shape[-2:])
            write_labels(targets[res.position], labels.shape, iter(planes),
                         replace=args.overwrite, provenance=records[res.position],
                         **_labels_metadata(args, paths[res.position],
                                            labels.ndim + (1 if args.rgb else 0)))
            marks.mark(res.position, targets[res.position])
            rows.extend({"image": names[res.position], **r} for r in res.rows)
            bar.update(done, len(paths))
    finally:
        bar.close()
        if client is not None:
            from ..api.cluster import close_client

            close_client(client)
    if args.table is not None:
        rows.sort(key=lambda r: names.index(r["image"]))
        write_table(args.table, ["image", *auto_table_columns(n_lead)], rows,
                    replace=args.overwrite)
    print(f"{len(rows)} object row(s) in {len(paths)} image(s) -> {args.out}"
          + (f", table {args.table}" if args.table else ""))
    return 0


def _pairs(pred: Path, gt: Path) -> tuple[list[Path], list[Path]]:
    """Files to compare: two files, or two folders paired by file name."""
    if pred.is_dir() != gt.is_dir():
        raise InputError("give two label files, or two folders of label files")
    if not pred.is_dir():
        return [pred], [gt]
    preds = {p.name: p for p in expand_inputs([pred])}
    gts = {p.name: p for p in expand_inputs([gt])}
    common = sorted(set(preds) & set(gts))
    if not common:
        raise InputError(f"no file name is in both {pred} and {gt}")
    missing = sorted(set(gts) - set(preds))
    if missing:
        raise InputError(f"{len(missing)} ground-truth file(s) have no prediction in {pred}: "
                         f"{', '.join(missing[:5])}")
    return [preds[n] for n in common], [gts[n] for n in common]


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Match the prediction's instances against the ground truth; print (and write) the table."""
    check_outputs([("--csv", args.csv)],
                  [("prediction", args.pred), ("ground truth", args.gt)], args.overwrite)
    preds, gts = _pairs(args.pred, args.gt)
    report = api.evaluate(preds, gts, names=[p.stem for p in preds])
    print(report.text())
    if args.csv is not None:
        write_table(args.csv, report.columns, report.rows(), replace=args.overwrite)
        print(f"table -> {args.csv}")
    return 0


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register segment-all and evaluate."""
    p = sub.add_parser(
        "segment-all", help="automatic instance segmentation of every slice (no prompts)",
        formatter_class=FMT,
        description=_wrap("Cover each slice with a grid of single clicks on its embedding, keep "
        "the masks SAM's automatic mask generator keeps (options named and defaulted as its "
        "arguments), and write an int32 labels stack and, with --table, one CSV row per object "
        "and slice: label, score (predicted IoU), stability, area_px, index_0.., bbox. Objects "
        f"of consecutive slices are linked into 3-D objects (one id through z) when their IoU "
        f"exceeds --link-iou (default {LINK_IOU}). See docs/automatic.md."),
        epilog="example:\n  napari-sam3-onnx segment-all hf-tracker nuclei.tif --out labels.tif "
        "--table objects.csv --store emb.zarr --points-per-side 24")
    p.add_argument("bundle", help="bundle id or folder (needs 'clicks')")
    p.add_argument("inputs", nargs="+", type=Path,
                   help="TIFF, .npy or zarr/OME-Zarr images, or folders of them")
    p.add_argument("--out", type=Path, required=True,
                   help="labels file (.tif, .npy or .zarr); with several images a folder that "
                   "gets <image name>.tif for each")
    p.add_argument("--table", type=Path, help="CSV file with one row per object and slice "
                   "(with several images: one table, an 'image' column first)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace --out/--table if they exist (never the input or the store)")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    p.add_argument("--link-iou", type=link_iou, default=LINK_IOU,
                   help=f"IoU linking objects of consecutive slices (default {LINK_IOU})")
    p.add_argument("--no-link", action="store_true", help="new ids on every slice")
    p.add_argument("--propagate-from", type=int, metavar="Z",
                   help="instead of linking: segment slice Z only and carry each of its objects "
                   "through the stack with the memory graphs (one id through z; objects absent "
                   "from slice Z are not found)")
    defaults = AutoMaskSettings()
    for name, kind in SAM_OPTIONS:
        p.add_argument(_flag(name), dest=name, type=kind, default=None,
                       help=f"SAM's {name} (default {getattr(defaults, name):.4g})")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=whole(1, "--workers"), metavar="N",
                       help="segment the images on a local dask cluster of N one-thread workers "
                       "(one task per image)")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="segment on a running dask.distributed scheduler (tcp://host:8786)")
    p.add_argument("--no-processes", action="store_true",
                   help="with --workers: threads in this process instead of worker processes")
    add_skip_done(p)
    _tile_arg(p)
    _image_args(p)
    p.set_defaults(func=cmd_segment_all)

    p = sub.add_parser(
        "evaluate", help="compare instance labels with ground truth (mSA, precision, recall, F1)",
        formatter_class=FMT,
        description=_wrap("Match predicted and true instances one to one at IoU thresholds "
        "0.50:0.05:0.95 and print, per image and overall: mSA (mean of TP/(TP+FP+FN) over the "
        "thresholds, as micro-sam and StarDist report it), and at IoU 0.5 precision, recall, F1 "
        "and AP50 (the Data Science Bowl's TP/(TP+FP+FN)). 3-D labels are matched as volumes. "
        "--csv adds the segmentation accuracy at every threshold."),
        epilog="examples:\n  napari-sam3-onnx evaluate labels.tif mask.tif\n"
        "  napari-sam3-onnx evaluate predictions/ ground_truth/ --csv scores.csv")
    p.add_argument("pred", type=Path, help="predicted labels (file, or folder of files)")
    p.add_argument("gt", type=Path, help="ground-truth labels (file, or folder: same names)")
    p.add_argument("--csv", type=Path, help="write the table as CSV")
    p.add_argument("--overwrite", action="store_true", help="replace --csv if it exists")
    p.set_defaults(func=cmd_evaluate)
