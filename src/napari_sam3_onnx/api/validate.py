"""Checks on prompts, seeds and windows, made before any slice is encoded.

A NaN click, an inverted window or an empty seed mask would otherwise surface after minutes of
encoding, or worse, give an empty or wrong answer that looks like a real one. Each check raises
:class:`~napari_sam3_onnx.models.errors.PromptError` (or :class:`~.io.InputError` for windows)
with a message in the caller's own terms: ``(row, col)`` slice pixels, slice positions along
the slice axis.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ..models.errors import PromptError
from .io import InputError

#: The largest object id a label value can hold (labels are int32).
MAX_LABEL = 2**31 - 1


class SeedOverlapWarning(UserWarning):
    """Two objects are seeded on the same pixels of the same slice."""


def check_window(window) -> tuple[float, float] | None:
    """``(lo, hi)`` as floats; InputError for a NaN/infinite or inverted window."""
    if window is None:
        return None
    lo, hi = (float(v) for v in window)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InputError(f"Window ({lo:g}, {hi:g}): both limits must be finite numbers.")
    if not hi > lo:
        raise InputError(f"Window ({lo:g}, {hi:g}): the upper limit must be above the lower one.")
    return lo, hi


def check_points(points_rc, labels, plane_shape: Sequence[int], where: str = "") -> None:
    """Clicks: finite, inside the ``(rows, cols)`` plane, labels 0 (negative) or 1 (positive)."""
    pts = np.asarray(points_rc, dtype=np.float64).reshape(-1, 2)
    rows, cols = (int(s) for s in plane_shape[:2])
    for r, c in pts:
        if not (math.isfinite(r) and math.isfinite(c)):
            raise PromptError(f"Click ({r:g}, {c:g}){where}: row and column must be finite.")
        if not (0 <= r < rows and 0 <= c < cols):
            raise PromptError(f"Click (row {r:g}, col {c:g}){where} is outside the {rows} x "
                              f"{cols} slice (rows 0 to {rows - 1}, columns 0 to {cols - 1}).")
    if labels is not None:
        labs = np.asarray(labels).reshape(-1)
        bad = [v for v in labs.tolist() if v not in (0, 1)]
        if bad:
            raise PromptError(f"Click labels{where} must be 1 (positive) or 0 (negative); got "
                              f"{bad[0]!r}.")


def check_box(box_rc, plane_shape: Sequence[int], where: str = "") -> None:
    """A box ``(r0, c0, r1, c1)``, corners in any order: finite, not flat, overlapping the plane."""
    if box_rc is None:
        return
    r0, c0, r1, c1 = (float(v) for v in np.asarray(box_rc, np.float64).reshape(4))
    text = f"Box ({r0:g}, {c0:g}, {r1:g}, {c1:g}){where}"
    if not all(math.isfinite(v) for v in (r0, c0, r1, c1)):
        raise PromptError(f"{text}: every corner must be a finite number.")
    if r1 == r0 or c1 == c0:
        raise PromptError(f"{text} has no area: its rows or its columns coincide.")
    r0, r1, c0, c1 = min(r0, r1), max(r0, r1), min(c0, c1), max(c0, c1)
    rows, cols = (int(s) for s in plane_shape[:2])
    if r1 <= 0 or c1 <= 0 or r0 >= rows or c0 >= cols:
        raise PromptError(f"{text} does not overlap the {rows} x {cols} slice.")


def check_object_id(oid) -> int:
    """A label value: a whole number from 1 to :data:`MAX_LABEL`."""
    try:
        value = float(oid)
    except (TypeError, ValueError):
        raise PromptError(f"Object id {oid!r} is not a number.") from None
    if not math.isfinite(value) or value != int(value) or not 1 <= value <= MAX_LABEL:
        raise PromptError(f"Object id {oid!r}: ids are whole numbers from 1 to {MAX_LABEL} "
                          "(they become int32 label values).")
    return int(value)


def check_seeds(seeds: Mapping, n: int, plane_shape: Sequence[int],
                index_range: tuple[int, int] | None = None) -> None:
    """Object ids, slice positions, clicks, boxes and masks of propagation seeds.

    Parameters
    ----------
    seeds : mapping object id -> Seed or sequence of Seed
        As :func:`~napari_sam3_onnx.api.propagate` takes them.
    n : int
        Slices along the propagation axis.
    plane_shape : (rows, cols)
        The slices' size.
    index_range : (int, int), optional
        The half-open range of slices to visit; every seed must lie inside it.

    Raises
    ------
    PromptError
        An id out of range, a seed slice outside the stack (or the range), a bad click or box,
        an empty mask or one of the wrong shape (the same for every kind of bundle).

    Warns
    -----
    SeedOverlapWarning
        Two objects share seed pixels on one slice (each then claims the same pixels).
    """
    rows, cols = (int(s) for s in plane_shape[:2])
    painted: dict[int, np.ndarray] = {}
    for oid, items in seeds.items():
        oid = check_object_id(oid)
        for seed in items if isinstance(items, (list, tuple)) else [items]:
            z = int(seed.index)
            where = f" of object {oid} on slice {z}"
            if not 0 <= z < n:
                raise PromptError(f"The seed{where} is outside the stack (slices 0 to {n - 1}).")
            if index_range is not None and not index_range[0] <= z < index_range[1]:
                raise PromptError(f"The seed{where} is outside the range of slices to visit "
                                  f"({index_range[0]} to {index_range[1] - 1}).")
            if seed.mask is not None:
                mask = np.asarray(seed.mask, bool)
                if mask.shape != (rows, cols):
                    raise PromptError(f"The seed mask{where} is {mask.shape}, the slices "
                                      f"{(rows, cols)}.")
                if not mask.any():
                    raise PromptError(f"The seed mask{where} is empty; paint the object on "
                                      "its seed slice.")
            else:
                p = seed.prompt
                check_points(p.points_rc, p.labels, (rows, cols), where)
                check_box(p.box_rc, (rows, cols), where)
                if p.box_rc is None and not (np.asarray(p.labels) == 1).any():
                    raise PromptError(f"The seed{where} has no positive click and no box.")
                mask = np.zeros((rows, cols), bool)
                for (r, c), lab in zip(p.points_rc, p.labels, strict=True):
                    if lab == 1:
                        mask[int(r), int(c)] = True
            _note_overlap(painted, z, oid, mask)


def _note_overlap(painted: dict[int, np.ndarray], z: int, oid: int, mask: np.ndarray) -> None:
    plane = painted.setdefault(z, np.zeros(mask.shape, np.int64))
    clash = np.unique(plane[mask & (plane != 0) & (plane != oid)])
    if clash.size:
        warnings.warn(f"Objects {int(clash[0])} and {oid} are seeded on the same pixels of "
                      f"slice {z} ({int((mask & (plane == clash[0])).sum())} px); each will "
                      "claim them.", SeedOverlapWarning, stacklevel=3)
    plane[mask & (plane == 0)] = oid
