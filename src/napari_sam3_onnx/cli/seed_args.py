"""Seeds for ``propagate`` from the command line: clicks, boxes and label images."""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..api.io import InputError, read_image
from ..api.validate import MAX_LABEL
from ..engine.tracking.types import Seed


def add_seed_args(p: argparse.ArgumentParser) -> None:
    """``--click``, ``--negative``, ``--box``, ``--seed-labels`` and ``--seed-slice``."""
    p.add_argument("--click", nargs=4, action="append", type=float, default=[],
                   metavar=("OBJ", "Z", "ROW", "COL"),
                   help="positive click on object OBJ (an id > 0) at slice Z (repeatable)")
    p.add_argument("--negative", nargs=4, action="append", type=float, default=[],
                   metavar=("OBJ", "Z", "ROW", "COL"), help="negative click (repeatable)")
    p.add_argument("--box", nargs=6, action="append", type=float, default=[],
                   metavar=("OBJ", "Z", "R0", "C0", "R1", "C1"),
                   help="box around object OBJ on slice Z (one per object and slice)")
    p.add_argument("--seed-labels", type=Path, metavar="FILE",
                   help="labels image whose ids become mask seeds: 2-D (with --seed-slice) or a "
                   "stack shaped like the input (every slice holding an id seeds it there)")
    p.add_argument("--seed-slice", type=int, metavar="Z", help="slice of a 2-D --seed-labels")


def _obj_z(values, n: int, what: str) -> tuple[int, int]:
    text = " ".join(f"{v:g}" for v in values)
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"{what} {text}: every value must be a finite number.")
    obj, z = values[0], values[1]
    if obj != int(obj) or not 1 <= obj <= MAX_LABEL:
        raise InputError(f"{what} {text}: the object id must be a positive integer up to "
                         f"{MAX_LABEL} (it becomes an int32 label value), got {obj:g}.")
    if z != int(z) or not 0 <= z < n:
        raise InputError(f"{what} {text}: slice {z:g} is outside the stack (0 to {n - 1}).")
    return int(obj), int(z)


def _mask_seeds(args: argparse.Namespace, n: int, plane_shape) -> dict[int, list[Seed]]:
    labels = read_image(args.seed_labels)
    if not (np.issubdtype(labels.dtype, np.integer) or labels.dtype == np.bool_):
        raise InputError(f"--seed-labels {args.seed_labels} holds {labels.dtype} values; a "
                         "labels image holds whole numbers (0 = background).")
    seeds: dict[int, list[Seed]] = defaultdict(list)
    if labels.ndim == 2:
        if args.seed_slice is None or not 0 <= args.seed_slice < n:
            raise InputError(f"A 2-D --seed-labels needs --seed-slice Z inside the stack (0 to "
                             f"{n - 1}); got {args.seed_slice}.")
        planes: Iterable[tuple[int, np.ndarray]] = [(args.seed_slice, np.asarray(labels))]
    elif labels.ndim == 3 and labels.shape[0] == n:
        planes = ((z, np.asarray(labels[z])) for z in range(n))
    else:
        raise InputError(f"--seed-labels has shape {tuple(labels.shape)}; expected a plane "
                         f"{tuple(plane_shape)} or a stack of {n} of them.")
    for z, plane in planes:
        if plane.shape != tuple(plane_shape):
            raise InputError(f"--seed-labels planes are {plane.shape}, the image's "
                             f"{tuple(plane_shape)}.")
        ids = np.unique(plane)
        if ids[0] < 0 or ids[-1] > MAX_LABEL:
            raise InputError(f"--seed-labels {args.seed_labels} holds the value "
                             f"{ids[0] if ids[0] < 0 else ids[-1]}; object ids run from 1 to "
                             f"{MAX_LABEL} (0 = background).")
        for oid in ids:
            if oid > 0:
                seeds[int(oid)].append(Seed.from_mask(z, plane == oid))
    return seeds


def build_seeds(args: argparse.Namespace, view) -> dict[int, list[Seed]]:
    """Seeds per object id from the parsed arguments.

    Raises
    ------
    InputError
        No seed, an id that is not a positive integer, a slice outside the stack, or labels
        that do not fit the image.
    """
    n = int(view.shape[0])
    plane_shape = view.shape[1:3] if view.ndim >= 3 else view.shape
    clicks: dict[tuple[int, int], list] = defaultdict(list)
    boxes: dict[tuple[int, int], tuple] = {}
    for values in args.click:
        clicks[_obj_z(values, n, "--click")].append((values[2], values[3], 1))
    for values in args.negative:
        clicks[_obj_z(values, n, "--negative")].append((values[2], values[3], 0))
    for values in args.box:
        key = _obj_z(values, n, "--box")
        if key in boxes:
            raise InputError(f"--box: object {key[0]} has two boxes on slice {key[1]}.")
        boxes[key] = tuple(values[2:])
    seeds: dict[int, list[Seed]] = defaultdict(list)
    for obj, z in sorted(set(clicks) | set(boxes)):
        pts = clicks.get((obj, z), [])
        points = np.array([(r, c) for r, c, _ in pts], float).reshape(-1, 2)
        labels = np.array([lab for _, _, lab in pts], int)
        seeds[obj].append(Seed.clicks(z, points, labels, boxes.get((obj, z))))
    if args.seed_labels is not None:
        for obj, more in _mask_seeds(args, n, plane_shape).items():
            seeds[obj].extend(more)
    if not seeds:
        where = f" ({args.seed_labels} holds no object id > 0)" if args.seed_labels else ""
        raise InputError("Give at least one seed: --click OBJ Z ROW COL, --box or "
                         f"--seed-labels{where}.")
    return dict(seeds)
