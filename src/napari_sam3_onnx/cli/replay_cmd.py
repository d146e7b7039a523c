"""Provenance of the labels commands, and ``replay``: run a recorded output's prompts again.

Each labels command (``text``, ``propagate``, ``segment-all``) hands :func:`record_for` its
prompts; the record (:mod:`~napari_sam3_onnx.api.provenance`) names the options in
:data:`SETTINGS` by their argparse names, so ``replay`` can give them back to the very same
command function, which runs the same :mod:`napari_sam3_onnx.api` workflow. Replay writes a new
output (the rules of every labels command hold: never over an existing file without
``--overwrite``, never over the input, the recorded output, the bundle or the store) and then
compares it with the recorded one: identical, or how much each recorded object changed (its
best IoU with a new object). With the same bundle (same file digests) anything but identical
labels is an error (exit code 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .. import api
from ..api.bundles import resolve_bundle
from ..api.dock_replay import DOCK, NOTHING, replay_commits, replayable
from ..api.io import InputError, read_image
from ..api.labels_files import write_labels
from ..api.provenance import (
    Provenance,
    bundle_info,
    make_record,
    read_provenance,
    seeds_from_json,
    sidecar,
)
from ..engine.evaluation import overlap_iou
from ..models.registry import get_bundle
from .args import FMT, _wrap, whole
from .guard import check_outputs

#: Options recorded per workflow (argparse ``dest`` names); replay sets them back.
SETTINGS = {
    "text": ("axis", "rgb", "series", "window", "slices", "tile", "floor", "min_area",
             "fill_holes", "link_iou", "exemplar_ids", "negative_ids", "others_negative",
             "through_stack"),
    "propagate": ("axis", "rgb", "series", "window", "direction", "range", "stop_after", "fixed"),
    "segment-all": ("axis", "rgb", "window", "slices", "tile", "link_iou", "no_link",
                    "propagate_from"),
}


def record_for(args: argparse.Namespace, workflow: str, bundle: api.Bundle, image: Path,
               prompts: Mapping, planes: Sequence[Sequence[int]] = (),
               more: Mapping | None = None, store=None) -> Provenance:
    """The provenance of a labels command's output.

    Parameters
    ----------
    args : argparse.Namespace
        The command's parsed options; :data:`SETTINGS` ``[workflow]`` of them are recorded.
    bundle : api.Bundle
        The opened bundle (its files are hashed once, then cached).
    image : Path
        The input image (its shape as read is recorded).
    prompts : mapping
        JSON prompts (see :class:`~napari_sam3_onnx.api.provenance.Provenance`).
    planes : sequence of sequence of int
        Leading indices of the planes worked on (empty: all).
    more : mapping, optional
        Settings resolved by the command itself (e.g. automatic-mask defaults).
    store : EmbeddingStore, optional
        The opened store the run reads: its path and storage precision are recorded.
    """
    settings = {name: getattr(args, name, None) for name in SETTINGS[workflow]}
    settings.update(more or {})
    if getattr(args, "store", None) is not None:  # informative: replay encodes anew
        settings["store"] = {"path": str(Path(args.store).resolve()),
                             "precision": getattr(store, "precision", None)}
    precision = bundle.adapter.precision or _declared_precision(str(args.bundle))
    info = bundle_info(bundle.folder, bundle.layout, precision)
    shape = read_image(image, getattr(args, "series", None)).shape  # the series worked on
    return make_record(workflow, info, image, shape, prompts, settings, planes)


def _declared_precision(bundle: str) -> str | None:
    """The registry's precision of a bundle given by id (None: a folder, or none declared)."""
    if Path(bundle).is_dir():
        return None
    try:
        return get_bundle(bundle).precision
    except KeyError:
        return None


def _argv(record: Provenance, args: argparse.Namespace, image: Path) -> list[str]:
    argv = [record.workflow, str(args.bundle), str(image), "--out", str(args.out)]
    if record.workflow == "text":
        concepts = record.prompts.get("concepts") or []
        if concepts:
            argv += ["--concepts", ", ".join(str(c) for c in concepts)]
        if record.prompts.get("exemplars_from"):  # exemplars taken from a labels file
            argv += ["--exemplars-from", str(record.prompts["exemplars_from"])]
    if args.overwrite:
        argv.append("--overwrite")
    if args.store is not None:
        argv += ["--store", str(args.store)]
    argv += ["--providers", args.providers] + (["--threads", str(args.threads)]
                                               if args.threads else [])
    return argv + (["--quiet"] if args.quiet else [])


def replay_namespace(record: Provenance, args: argparse.Namespace,
                     image: Path) -> argparse.Namespace:
    """The recorded command's options, with this call's bundle, image, output and store.

    The recorded command line is parsed by the very parser that parsed ``args`` (handed to
    every command as ``args.parser`` by :func:`~napari_sam3_onnx.cli.build_parser`).
    """
    if record.workflow not in SETTINGS:
        raise InputError(f"{args.output} records the workflow {record.workflow!r}, which "
                         f"'replay' cannot run (it runs {', '.join(SETTINGS)}).")
    ns = args.parser.parse_args(_argv(record, args, image))
    for name, value in record.settings.items():
        if hasattr(ns, name) and name != "store":
            setattr(ns, name, value)
    if record.workflow == "propagate":
        ns.seeds = seeds_from_json(record.prompts.get("seeds", {}))
    ns.record = args.record
    return ns


def replay_dock(record: Provenance, args: argparse.Namespace, image: Path) -> int:
    """Replay a labels layer saved from the dock: its commits in order (``api/dock_replay.py``)."""
    commits = list(record.prompts.get("commits") or [])
    bundle = api.open_bundle(args.bundle, args.providers, args.threads or 0)
    data = read_image(image)
    rgb = any(bool(c.get("rgb")) for c in commits)
    shape = tuple(int(s) for s in (data.shape[:-1] if rgb else data.shape))
    notes: list[str] = []
    labels = replay_commits(bundle, data, commits, shape, notes)
    for note in notes:
        print(f"note: {note}", flush=True)
    precision = bundle.adapter.precision or _declared_precision(str(args.bundle))
    info = bundle_info(bundle.folder, bundle.layout, precision)
    new = make_record(DOCK, info, image, data.shape, record.prompts, record.settings)
    write_labels(args.out, shape, (labels[i] for i in np.ndindex(*shape[:-2])),
                 replace=args.overwrite, provenance=new)
    return 0


def compare(old: np.ndarray, new: np.ndarray) -> tuple[bool, dict[int, float]]:
    """Whether two label arrays are identical, and each old object's best IoU with a new one.

    Both arrays are held in memory (int32: 4 bytes a voxel each).
    """
    if old.shape != new.shape:
        raise InputError(f"the replayed labels are {new.shape}, the recorded ones {old.shape}")
    if np.array_equal(old, new):
        return True, {int(i): 1.0 for i in np.unique(old) if i != 0}
    iou, _, old_ids = overlap_iou(new, old)
    best = iou.max(axis=0) if iou.shape[0] else np.zeros(len(old_ids))
    return False, {int(i): float(v) for i, v in zip(old_ids, best, strict=True)}


def _labels(path: Path) -> np.ndarray:
    return np.asarray(read_image(path))


def cmd_replay(args: argparse.Namespace) -> int:
    """Run a recorded output's prompts again into --out; compare the result with the record."""
    record = read_provenance(args.output)
    if record.workflow == DOCK and not replayable(record):
        raise InputError(f"{args.output} cannot be replayed: {NOTHING}.")
    if args.image is None and not record.image.get("path"):
        raise InputError(f"{args.output} records no image file (the dock's image was not read "
                         "from one); give the image with --image.")
    image = args.image or Path(record.image["path"])
    if args.image is None and not image.exists():
        raise InputError(f"{args.output} was made from {image}, which does not exist any "
                         "more; give the image with --image.")
    bundle_folder = resolve_bundle(args.bundle)
    protected = [("recorded output", args.output), ("input image", image),
                 ("bundle", bundle_folder), ("embedding store", args.store)]
    if args.output.name.lower().endswith(".npy"):
        protected.append(("recorded sidecar", sidecar(args.output)))
    check_outputs([("--out", args.out)], protected, args.overwrite)
    shape = [int(s) for s in read_image(image).shape]
    if shape != list(record.image.get("shape", shape)):
        raise InputError(f"--image {image} has shape {tuple(shape)}; {args.output} was made "
                         f"from an image of shape {tuple(record.image['shape'])}.")
    if record.workflow == DOCK:
        code = replay_dock(record, args, image)
    else:
        ns = replay_namespace(record, args, image)
        code = int(ns.func(ns))
    if code != 0:
        return code
    same, ious = compare(_labels(args.output), _labels(args.out))
    now = read_provenance(args.out).bundle
    same_bundle = now.digest == record.bundle.digest
    if same:
        print(f"replay: identical to {args.output} ({len(ious)} object(s); bundle "
              f"{'the same' if same_bundle else 'another'}: {now.digest[:19]})")
        return 0
    worst = sorted(ious.items(), key=lambda kv: kv[1])
    text = ", ".join(f"{oid}: {v:.3f}" for oid, v in worst[:50])
    more = f" (+{len(worst) - 50} more)" if len(worst) > 50 else ""
    mean = float(np.mean(list(ious.values()))) if ious else 1.0
    print(f"replay: {len(ious)} recorded object(s), mean best IoU {mean:.3f}; IoU per object "
          f"(worst first): {text}{more}")
    held = record.settings.get("held_before_commits") if record.workflow == DOCK else None
    if held:
        print(f"note: the layer held {held} labelled pixel(s) before its first dock commit "
              "(painted or opened); those are not in the record, so the replay gives the "
              "commits alone.")
    if same_bundle:
        print(f"error: the same bundle ({now.digest[:19]}) on the same data did not reproduce "
              f"{args.output}: the labels differ.", flush=True)
        return 1
    print(f"bundle {record.bundle.id} ({record.bundle.digest[:19]}) -> {now.id} "
          f"({now.digest[:19]})")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register replay."""
    p = sub.add_parser(
        "replay", help="run a labels output's recorded prompts again and compare",
        formatter_class=FMT,
        description=_wrap("Read the provenance a labels output records (text, propagate or "
        "segment-all, or a layer saved from the dock: bundle digests, prompts, settings), run "
        "the same workflow with it on the "
        "recorded image (or --image) with --bundle, write --out, and compare: with the same "
        "bundle and data the labels must be identical (exit code 1 otherwise); with another "
        "bundle it prints each recorded object's best IoU with the new labels."),
        epilog="example:\n  napari-sam3-onnx replay labels.tif --bundle toy --out again.tif")
    p.add_argument("output", type=Path, help="a labels file written by this plugin")
    p.add_argument("--image", type=Path, help="the input image (default: the recorded path)")
    p.add_argument("--bundle", required=True, help="bundle id or folder to run")
    p.add_argument("--out", type=Path, required=True, help="the new labels file")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    p.add_argument("--providers", default="auto", help="onnxruntime execution provider")
    p.add_argument("--threads", type=whole(1, "--threads"), metavar="N",
                   help="threads per operator (default: onnxruntime's choice)")
    p.set_defaults(func=cmd_replay)
