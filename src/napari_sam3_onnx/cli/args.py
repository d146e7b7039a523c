"""The options of the image commands (precompute, text, propagate) and their checks.

Every number is checked when the command line is read, before a file is opened: a
non-positive thread, worker, tile or stop count, more threads than 4 per CPU, a tile under 32
px, a negative minimum area, a score floor outside 0..1, a link IoU of 1 or more, or NaN
anywhere is a usage error (exit code 2).
"""

from __future__ import annotations

import argparse
import math
import os
import textwrap
from pathlib import Path

from .seed_args import add_seed_args

FMT = argparse.RawDescriptionHelpFormatter


#: What ``--out`` of the labels commands takes.
OUT_HELP = "labels: .tif, .npy, .zarr, .ome.zarr (NGFF) or IMAGE.ome.zarr/labels/NAME"


def whole(low: int, what: str):
    """An argparse type: a whole number >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be {low} or more")
        return value
    return parse


def finite(text: str) -> float:
    """An argparse type: a finite number (no nan, no inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    value = finite(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: scores lie between 0 and 1")
    return value


def threads(text: str) -> int:
    """An argparse type: threads per operator, 1 to :data:`MAX_THREADS_PER_CPU` x the CPUs.

    Far more threads than cores do not run faster; onnxruntime's spinning pools then starve
    each other and a run that should take seconds never ends.
    """
    value = whole(1, "--threads")(text)
    cpus = os.cpu_count() or 1
    if value > MAX_THREADS_PER_CPU * cpus:
        raise argparse.ArgumentTypeError(
            f"{text!r}: this machine has {cpus} CPU(s); give at most "
            f"{MAX_THREADS_PER_CPU * cpus} threads (or leave --threads out)")
    return value


#: ``--threads`` may ask for at most this many threads per CPU.
MAX_THREADS_PER_CPU = 4


def link_iou(text: str) -> float:
    """An argparse type: an IoU from 0 up to (not including) 1."""
    value = finite(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give an IoU from 0 up to (not including) 1, e.g. 0.3 (at 1 nothing "
            "but identical masks would link)")
    return value


def _image_args(p: argparse.ArgumentParser, slices: bool = True) -> None:
    p.add_argument("--axis", type=int, default=0,
                   help="the slice axis (default 0); it is moved to the front of the output")
    p.add_argument("--window", type=finite, nargs=2, metavar=("LO", "HI"),
                   help="contrast window mapped to 0..255 (default: uint8 as is, otherwise each "
                   "slice's min..max); use the window you view the data with")
    p.add_argument("--rgb", action="store_true", help="the last axis holds RGB(A) channels")
    if slices:
        p.add_argument("--slices", metavar="A:B", help="only these positions along the slice "
                       "axis, Python-style (e.g. 0:10, 5, -3:)")
    p.add_argument("--providers", default="auto",
                   help="onnxruntime execution provider: auto, cpu, cuda, coreml, dml; or "
                   "openvino / openvino-bf16 (OpenVINO's CPU runtime, the [openvino] extra; "
                   "bf16 only for the workflows the bundle's bf16 gate verdicts pass, f32 "
                   "elsewhere: see inspect)")
    p.add_argument("--threads", type=threads, metavar="N",
                   help="threads per operator (default: onnxruntime's choice)")


#: The smallest ``--tile``: each tile is encoded at the model's full input size (about 1000
#: px), so smaller tiles only multiply the work (a 2048-px plane in 3-px tiles is half a
#: million encodes) without showing the model anything more.
MIN_TILE = 32


def _tile_size(text: str) -> int:
    if not text.isdigit() or int(text) < MIN_TILE:
        raise argparse.ArgumentTypeError(f"{text!r}: give a tile side of {MIN_TILE} pixels or "
                                         "more (each tile is encoded at the model's full size)")
    return int(text)


def _tile_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tile", type=_tile_size, metavar="SIZE",
                   help="cut planes longer than SIZE px into SIZE-px tiles (a quarter overlap), "
                   "each encoded at full resolution; see docs/large-images.md")


def _series_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--series", type=whole(0, "--series"), metavar="N",
                   help="for a multi-series TIFF: the image series to read (default: the "
                   "full-resolution one; a warning names it)")


def _wrap(text: str) -> str:
    """Wrap a help description to 78 columns, keeping explicit line breaks."""
    return "\n".join(textwrap.fill(line, 78) for line in text.split("\n"))


def add_parsers(sub: argparse._SubParsersAction, commands: dict) -> None:
    """Register precompute, text and propagate, run by ``commands[name](args)``."""
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
    _series_arg(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=whole(1, "--workers"), metavar="N",
                       help="encode on a local dask cluster of N one-thread workers")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="encode on a running dask.distributed scheduler (tcp://host:8786)")
    p.add_argument("--no-processes", action="store_true",
                   help="with --workers: threads in this process instead of worker processes")
    _tile_arg(p)
    p.set_defaults(func=commands["precompute"])

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
    p.add_argument("--concepts",
                   help="comma-separated phrases, e.g. 'nucleus, cell' (required unless "
                   "--exemplars-from is given)")
    p.add_argument("--out", type=Path, required=True, help=OUT_HELP)
    p.add_argument("--table", type=Path, help="CSV file with one row per instance")
    p.add_argument("--overwrite", action="store_true",
                   help="replace --out/--table if they exist (never the input, seeds or store)")
    p.add_argument("--floor", type=fraction, default=0.5,
                   help="keep scores above this (default 0.5)")
    p.add_argument("--min-area", type=whole(0, "--min-area"), default=0, metavar="PX",
                   help="drop instances with fewer pixels (default 0: keep all)")
    p.add_argument("--fill-holes", action="store_true", help="fill holes inside instances")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    p.add_argument("--link-iou", type=link_iou, metavar="IOU", help="one id per object through z: "
                   "link instances of consecutive slices above this IoU (e.g. 0.3)")
    p.add_argument("--exemplars-from", type=Path, metavar="LABELS",
                   help="labels shaped like the input: their ids become SAM 3 exemplar boxes "
                   "on the planes they lie on, and only those planes are searched (with "
                   "--through-stack, what is found is carried through z)")
    p.add_argument("--exemplar-ids", type=whole(1, "--exemplar-ids"), nargs="+", metavar="ID",
                   help="with --exemplars-from: the positive ids (default: every id)")
    p.add_argument("--negative-ids", type=whole(1, "--negative-ids"), nargs="+", metavar="ID",
                   default=[], help="with --exemplars-from: ids that are negative exemplars")
    p.add_argument("--others-negative", action="store_true",
                   help="with --exemplars-from: every other id on an exemplar's plane is a "
                   "negative exemplar")
    p.add_argument("--through-stack", action="store_true",
                   help="with --exemplars-from: carry the instances found through z with the "
                   "memory tracker and link them across exemplar planes (one id per object)")
    _tile_arg(p)
    _image_args(p)
    _series_arg(p)
    p.set_defaults(func=commands["text"])

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
    p.add_argument("--out", type=Path, required=True, help=OUT_HELP)
    add_seed_args(p)
    p.add_argument("--direction", choices=("both", "forward", "backward"), default="both")
    p.add_argument("--range", metavar="A:B", help="only visit these slices")
    p.add_argument("--stop-after", type=whole(1, "--stop-after"), default=2,
                   help="stop an object after N slices without it (default 2)")
    p.add_argument("--fixed", type=whole(0, "--fixed"), nargs="+", metavar="I",
                   help="for 4-D data: index of the other leading axis (e.g. the time point)")
    p.add_argument("--repropagate", action="store_true",
                   help="re-propagate labels already there: carry the ids of --seed-labels (a "
                   "stack shaped like the input) from --seed-slice; --out is those labels with "
                   "only these ids replaced, on the slices the run reaches")
    p.add_argument("--ids", type=whole(1, "--ids"), nargs="+", metavar="ID",
                   help="with --repropagate: the label ids to carry (default: all on the slice)")
    p.add_argument("--table", type=Path, help="CSV of object areas per slice")
    p.add_argument("--overwrite", action="store_true",
                   help="replace --out/--table if they exist (never the input, seeds or store)")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    _image_args(p, slices=False)
    _series_arg(p)
    p.set_defaults(func=commands["propagate"])
