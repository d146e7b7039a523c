"""``refine``: fix one label of an existing labels file with clicks (:func:`api.refine`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .. import api
from ..api.io import InputError, image_names, planes_view
from ..api.jobs import StackJob
from ..api.labels_files import write_labels
from .args import FMT, OUT_HELP, _image_args, _wrap, finite, whole
from .guard import bundle_paths, check_store
from .labels_run import _bundle, _counted_store, _labels_metadata, _one_input, _outputs, _record
from .labels_run import _window as window_of


def cmd_refine(args: argparse.Namespace) -> int:
    """Refine label --id on plane --index with clicks; the labels with it replaced to --out."""
    path = _one_input(args, "refine")
    _outputs(args, path, [("labels", args.labels)])
    if args.store is not None:
        check_store(args.store, [("input image", path), ("labels", args.labels),
                                 *bundle_paths(args.bundle)])
    name = image_names([path])[0]
    view = StackJob(path, name, args.axis, args.rgb, window_of(args)).view()
    labels = planes_view(api.read_image(args.labels), args.axis)  # read plane by plane
    lead = view.ndim - (3 if args.rgb else 2)
    index = tuple(args.index or ())
    if len(index) != lead or labels.shape != tuple(view.shape[:lead + 2]):
        raise InputError(f"The image's planes need {lead} --index value(s) and labels of shape "
                         f"{tuple(view.shape[:lead + 2])}; got --index {list(index)} and "
                         f"labels {tuple(labels.shape)}.")
    points = [(r, c) for r, c in args.click] + [(r, c) for r, c in args.negative]
    marks = [1] * len(args.click) + [0] * len(args.negative)
    bundle = _bundle(args)
    record = _record(args, args.store)
    store = _counted_store(bundle, record, args.store)
    plane, answer = api.refine(bundle, view, labels, args.id, points or None, marks or None,
                               index=index, rgb=args.rgb, window=window_of(args), store=store,
                               image=name)
    before = np.asarray(labels[index]) == args.id
    shape = tuple(int(n) for n in labels.shape)
    planes = (plane if k == index else np.asarray(labels[k], np.int32)
              for k in np.ndindex(*shape[:lead]))  # one plane in memory at a time
    write_labels(args.out, shape, planes, replace=args.overwrite,
                 **_labels_metadata(args, path, view.ndim))
    record.done("--out", args.out)
    how = "" if answer.present else " SAM found no object: the label was removed there."
    print(f"label {args.id} on plane {list(index)}: {int(before.sum())} -> "
          f"{int((plane == args.id).sum())} px (only this id changed) -> {args.out}.{how}")
    return 0


def add_parsers(sub) -> None:
    """Register ``refine``."""
    p = sub.add_parser(
        "refine", help="refine one label of a labels file with clicks", formatter_class=FMT,
        description=_wrap("Refine label --id of --labels on one plane: the label's box and mask "
        "(as SAM's mask prompt, where the bundle's decoder takes one) and the clicks prompt "
        "SAM, and the answer replaces exactly that id's pixels on that plane. Writes the whole "
        "labels array to --out (never to --labels)."),
        epilog="example:\n  napari-sam3-onnx refine BUNDLE stack.tif --labels cellpose.tif "
        "--id 5 --index 3 --click 40 76 --out cellpose-fixed.tif")
    p.add_argument("bundle", help="bundle id or folder (needs 'clicks')")
    p.add_argument("input", type=Path, help="one TIFF, .npy or zarr/OME-Zarr image")
    p.add_argument("--labels", type=Path, required=True, help="the labels, shaped like the input")
    p.add_argument("--id", type=whole(1, "--id"), required=True, help="the label to refine")
    p.add_argument("--index", type=whole(0, "--index"), nargs="*", metavar="I",
                   help="the plane's index along the leading axes (none for a 2-D image)")
    p.add_argument("--click", type=finite, nargs=2, action="append", default=[],
                   metavar=("ROW", "COL"), help="positive click (repeatable)")
    p.add_argument("--negative", type=finite, nargs=2, action="append", default=[],
                   metavar=("ROW", "COL"), help="negative click (repeatable)")
    p.add_argument("--out", type=Path, required=True, help=OUT_HELP)
    p.add_argument("--table", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--overwrite", action="store_true",
                   help="replace --out if it exists (never the input, labels or store)")
    p.add_argument("--store", type=Path, help="embedding store to read (and add to)")
    _image_args(p, slices=False)
    p.set_defaults(func=cmd_refine)
