"""Writing a propagation into the user's Labels layer: slice by slice, then one undo step.

Each slice is written into ``target.data`` as soon as it arrives (so the user watches the
objects appear) through the one labels writer's
:class:`~napari_sam3_onnx._napari.labels_writer.LiveWrite`. When the run ends (finished,
cancelled or failed) :meth:`RunWriter.finish` turns the whole run into **one** undo step, so one
``layer.undo()`` (Ctrl+Z) removes the run. Pixels the user painted over during the run keep the
user's paint and are left out of the undo step.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
from napari.layers import Labels

from napari_sam3_onnx._napari.labels_writer import LiveWrite, plane_indices
from napari_sam3_onnx.engine.encoding import lead_index
from napari_sam3_onnx.engine.labels_merge import propagated
from napari_sam3_onnx.engine.tracking.labels import LabelWriter
from napari_sam3_onnx.engine.tracking.steps import SliceOutput

#: Share of an object's pixels on a slice that other objects may keep before the run says so.
REFUSED_SHARE = 0.05


def refused_note(writer: RunWriter, axis: str) -> str:
    """What the run did not write because other objects held the pixels ("" when nothing)."""
    if not writer.refused:
        return ""
    slices = ", ".join(str(k) for k in sorted(writer.refused)[:8])
    more = "..." if len(writer.refused) > 8 else ""
    ids = ", ".join(map(str, sorted(set().union(*writer.refused.values()))))
    return (f" On {axis}={slices}{more} other objects (id {ids}) already held part of the "
            "propagated object, and those pixels were kept as they were; tick 'Overwrite "
            "other objects' to replace them.")


def owner_plane(outputs: Mapping[int, SliceOutput], shape: tuple[int, int]) -> np.ndarray:
    """``(rows, cols)`` int32 plane of object ids (0: none) for one slice's outputs.

    Where several objects claim a pixel it goes to the highest upsampled logit (the engine's
    :class:`~napari_sam3_onnx.engine.tracking.labels.LabelWriter` rule).
    """
    plane = np.zeros((1, *shape), np.int32)
    LabelWriter(plane)(0, outputs)
    return plane[0]


class RunWriter:
    """Writes one propagation run into ``target`` along one axis of its leading axes.

    Parameters
    ----------
    target : napari.layers.Labels
        The user's labels (the image's shape without a colour axis).
    axis : int
        The leading axis the run walks.
    fixed : tuple of int
        Indices of the other leading axes, in order.
    overwrite : bool
        Replace other objects' pixels (off: only background and the object's own pixels).
    replace : collection of int
        Objects whose earlier pixels are cleared on each slice the run gives them an output
        (a re-propagation from corrections replaces, never layers on top).

    Attributes
    ----------
    slices : dict[int, set[int]]
        Per object id, the slices the run gave it an output on (present or not).
    written : set[int]
        Slices where at least one pixel changed.
    steps : int
        Slices handed to :meth:`write` (with outputs, possibly none present).
    """

    def __init__(self, target: Labels, axis: int, fixed: tuple[int, ...], overwrite: bool,
                 replace: Collection[int] = ()) -> None:
        self.target, self.axis, self.fixed = target, int(axis), tuple(int(i) for i in fixed)
        self.overwrite, self.replace = bool(overwrite), frozenset(int(i) for i in replace)
        self.slices: dict[int, set[int]] = {}
        self.written: set[int] = set()
        self.steps = 0  # slices handed to write (the run's commit-log entry records them)
        self.refused: dict[int, set[int]] = {}  # slice -> ids of the objects that kept pixels
        self._live = LiveWrite(target)
        self.closed = False

    def lead(self, k: int) -> tuple[int, ...]:
        """The full leading index of slice ``k`` along the walked axis."""
        return lead_index(self.axis, self.fixed, k)

    def write(self, k: int, outputs: Mapping[int, SliceOutput], refresh: bool = True) -> None:
        """Write slice ``k``'s outputs (``{object id: SliceOutput}``).

        ``refresh=False`` leaves the redraw to the caller (one per batch of slices).
        """
        if self.closed:
            return
        self.steps += 1  # a replay stops after as many (a cancelled run)
        if not outputs:
            return
        for oid in outputs:
            self.slices.setdefault(int(oid), set()).add(int(k))
        lead = self.lead(k)
        plane = np.array(self.target.data[lead])  # a copy, not a view
        owner = owner_plane(outputs, plane.shape)
        # The one rule a replay of the saved layer applies too (engine/labels_merge.py).
        new = propagated(plane, owner, list(outputs), self.replace, self.overwrite)
        if not self.overwrite:
            self._note_refused(k, owner, (owner > 0) & (new == owner), new)
        self._apply(k, lead, plane, new, refresh)

    def _note_refused(self, k: int, owner: np.ndarray, ok: np.ndarray, plane: np.ndarray) -> None:
        """Remember slice ``k`` when other objects kept a share of an object's pixels there."""
        refused = (owner > 0) & ~ok
        if not refused.any():
            return
        for oid in np.unique(owner[refused]):
            mine = owner == oid
            lost = mine & refused
            if lost.sum() >= REFUSED_SHARE * mine.sum():
                self.refused.setdefault(int(k), set()).update(
                    int(i) for i in np.unique(plane[lost]))

    def clear(self, k: int, ids: Collection[int]) -> None:
        """Remove objects ``ids`` from slice ``k`` (a re-run's slices it no longer reaches)."""
        if self.closed:
            return
        lead = self.lead(k)
        plane = np.array(self.target.data[lead])  # a copy, not a view
        new = np.where(np.isin(plane, list(ids)), 0, plane).astype(plane.dtype)
        self._apply(k, lead, plane, new)

    def _apply(self, k: int, lead: tuple[int, ...], plane: np.ndarray, new: np.ndarray,
               refresh: bool = True) -> None:
        changed = new != plane
        if not changed.any():
            return
        idx = plane_indices(lead, changed)
        self._live.write(idx, plane[changed], new[changed])
        self.written.add(int(k))
        if refresh:
            self.target.refresh()

    @property
    def changed_pixels(self) -> int:
        """Pixels written so far (a pixel written twice counts twice)."""
        return self._live.pixels

    def finish(self, entry: Mapping | None = None) -> int:
        """Make everything written one undo step on the target; returns the pixels in it.

        Safe to call more than once (later calls do nothing). ``entry``: the run's commit-log
        entry (:mod:`~napari_sam3_onnx._napari.commit_log`).
        """
        if self.closed:
            return 0
        self.closed = True
        return self._live.finish(entry)
