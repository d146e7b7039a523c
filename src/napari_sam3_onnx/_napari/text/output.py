"""Where a text run's instances go: a new Labels layer per run, or the user's layer (undoably).

A new layer ("SAM text: nucleus") gets each plane as it finishes, so a long run fills in while
it runs. A run into an existing layer is held until the run ends (or is cancelled) and then
written in one ``block_history`` step, only onto background pixels, with ids above the layer's
largest, so one undo removes the whole run and nothing of the user's is overwritten.

Either way the layer's ``features`` table gets one row per instance, in the instance table's
columns (:mod:`~napari_sam3_onnx._napari.features`: the CLI's CSV columns and napari's
``index``), so hovering an instance shows its concept and score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from napari.layers import Image, Labels

from napari_sam3_onnx._napari import commit_log, features
from napari_sam3_onnx._napari.features import append_features
from napari_sam3_onnx._napari.labels_writer import write_planes
from napari_sam3_onnx._napari.layers import (
    is_scratch,
    plane_shape,
    same,
    transform_kwargs,
)
from napari_sam3_onnx._napari.pacing import TABLE_EVERY_S, Every
from napari_sam3_onnx.engine.concepts.search import Instance, SliceResult

PREFIX = "SAM text: "


def layer_name(concepts: Sequence[str]) -> str:
    """``"SAM text: nucleus, mitochondrion"`` (``"SAM text: exemplars"`` without phrases)."""
    return PREFIX + (", ".join(concepts) if concepts else "exemplars")


def feature_rows(instances: Sequence[Instance], image: Image) -> pd.DataFrame:
    """The instance table's rows (kind ``"text"``) for instances found in ``image``."""
    return features.feature_rows(instances, "text", len(plane_shape(image)) - 2)


def _no_sample() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty pixel sample: the entry of a run's own layer is live while the layer is."""
    empty = np.zeros(0, np.int64)
    return empty, empty, empty


class TextOutput:
    """The destination of one run.

    Parameters
    ----------
    viewer : napari.Viewer
        The viewer (a new layer is added to it).
    image : napari.layers.Image
        The searched image (the new layer takes its shape, scale and translate).
    target : napari.layers.Labels, optional
        The user's layer; None = a new layer named by :func:`layer_name`, or ``reuse``.
    reuse : napari.layers.Labels, optional
        With no ``target``: the previous run's own layer, emptied and renamed for this run
        (so runs do not pile up layers).
    concepts : sequence of str
        The run's phrases (for the new layer's name).
    """

    def __init__(self, viewer, image: Image, target: Labels | None,
                 concepts: Sequence[str], reuse: Labels | None = None) -> None:
        self.viewer, self.image = viewer, image
        self.new = target is None
        self.pending: list[tuple[tuple[int, ...], SliceResult]] = []
        self.instances: list[Instance] = []
        self._unlisted: list[Instance] = []  # written, not yet in the features table
        self._table = Every(TABLE_EVERY_S)  # the table's updates while the run goes on
        self._dirty = False  # planes written since the last redraw
        self.planes = 0
        self.kept = ""  # what other objects kept (the writer's note)
        if target is None and reuse is not None and reuse in viewer.layers \
                and tuple(reuse.data.shape) == plane_shape(image):
            target = reuse  # the previous run's layer: this run's result replaces it
            target.data = np.zeros(plane_shape(image), np.int32)
            commit_log.clear(target)
            target.name = layer_name(concepts)
            target.features = feature_rows([], image)
        elif target is None:
            target = viewer.add_labels(np.zeros(plane_shape(image), np.int32),
                                       name=layer_name(concepts), **transform_kwargs(image))
            target.features = feature_rows([], image)
        self.layer = target
        data = target.data
        self.first_id = 1 if self.new or not data.size else int(np.max(data)) + 1

    @property
    def alive(self) -> bool:
        """Whether the layer is still in the viewer."""
        return self.layer in self.viewer.layers

    def add(self, index: tuple[int, ...], result: SliceResult, refresh: bool = True) -> bool:
        """Take one finished plane; False if the layer was removed from the viewer meanwhile.

        ``refresh=False`` leaves the redraw to :meth:`refresh` (one per batch of planes).
        """
        if not self.alive:
            return False
        self.planes += 1
        if not self.new:
            self.pending.append((tuple(index), result))
            return True
        if result.instances:
            self.layer.data[tuple(index)] = result.labels
            self._dirty = True
            self.instances += result.instances
            self._unlisted += result.instances
            if refresh:
                self.refresh()
        return True

    def refresh(self, redraw: bool = True, final: bool = True) -> None:
        """List the planes added since the table's last update (one update) and redraw.

        ``redraw=False``: no slice on screen changed. ``final=False`` (a batch while the run
        goes on): the table is updated at most once per :data:`~.pacing.TABLE_EVERY_S`.
        """
        if not (self.alive and self.new):
            return
        if self._unlisted and (final or self._table.due()):
            append_features(self.layer, feature_rows(self._unlisted, self.image))
            self._unlisted = []
        if redraw and self._dirty:
            self.layer.refresh()
            self._dirty = False

    def finish(self, entry: Mapping | None = None) -> list[Instance]:
        """Write what is held (existing layer: one undo step); returns the instances written.

        ``entry``: the run's commit-log entry (:mod:`~napari_sam3_onnx._napari.commit_log`).
        """
        if self.new or not self.pending or not self.alive:
            self.refresh()
            self.pending = []
            if self.new and self.instances and self.alive and entry is not None:
                commit_log.append(self.layer, entry, *_no_sample())  # a layer of its own
            return self.instances
        layer, data = self.layer, self.layer.data
        top = int(np.max(data)) if data.size else 0  # the user may have painted meanwhile
        shift = max(0, top + 1 - self.first_id)
        done = write_planes(layer, [(index, np.where(r.labels > 0, r.labels + shift, 0), None)
                                    for index, r in self.pending], entry=entry)
        self.kept = done.note()
        written = [Instance(inst.id + shift, inst.concept, inst.score,
                            done.count(index, inst.id + shift), inst.index, inst.box_rc)
                   for index, r in self.pending for inst in r.instances
                   if done.count(index, inst.id + shift) > 0]
        self.pending = []
        self.instances = written
        if written:
            append_features(layer, feature_rows(written, self.image))
        layer.refresh()
        return written

    def discard_if_empty(self) -> bool:
        """Remove a new layer that received no instance; True if it was removed."""
        if self.new and not self.instances and self.alive:
            self.viewer.layers.remove(self.layer)
            return True
        return False


def target_choices(viewer, image: Image | None, skip: Labels | None = None) -> list[Labels]:
    """Labels layers a run can write into: the image's shape (no colour axis), not ``skip``."""
    if image is None:
        return []
    shape = plane_shape(image)
    return [la for la in viewer.layers if isinstance(la, Labels) and not same(la, skip)
            and not is_scratch(la) and tuple(la.data.shape) == shape]


def summary(out: TextOutput, written: Sequence[Instance], total: int,
            concepts: Sequence[str], floor: float) -> str:
    """The message at the end of a run (drops a new layer that received nothing)."""
    head = (f"Cancelled after {out.planes} of {total} slice(s); the finished ones are kept. "
            if out.planes < total else "")
    what = ", ".join(concepts) or "the exemplars"
    if out.discard_if_empty() or not written:
        return f"{head}No instance of {what} scored above {floor:.2f} on {out.planes} slice(s)."
    undo = "" if out.new else " One undo (Ctrl+Z on that layer) removes them."
    found = len({tuple(inst.index) for inst in written})  # slices with an instance
    searched = "" if found == out.planes else f" ({out.planes} searched)"
    return (f"{head}{len(written)} instance(s) of {what} on {found} slice(s){searched} in "
            f"'{out.layer.name}'.{undo}{out.kept}")
