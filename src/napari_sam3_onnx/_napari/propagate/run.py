"""The Propagate tab's run: layers in, the API's propagation workflow off the Qt thread, writes.

The run itself is :func:`~napari_sam3_onnx.api.propagate.iter_propagate` over the dock's
workspace (the one the API and the CLI run), through the tabs' one worker wiring
(:class:`~napari_sam3_onnx._napari.generator_run.GeneratorRun`): the yielded slices arrive on the
Qt thread in paced batches, where :class:`RunWriter` writes them into the target layer. When the
worker ends - done, cancelled or failed - the run is closed as one undo step and
:attr:`PropagationRunner.done` reports the result. This module only turns layers into slice
references and the spec into the workflow's arguments.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace

from napari.layers import Image, Labels
from qtpy.QtCore import QObject, Signal
from qtpy.QtWidgets import QProgressBar

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.commit_entries import propagate_entry, propagate_finished
from napari_sam3_onnx._napari.generator_run import GeneratorRun, plane_shown
from napari_sam3_onnx._napari.propagate.writer import RunWriter
from napari_sam3_onnx.api.propagate import PropagationStep, iter_propagate
from napari_sam3_onnx.api.propagation_seeds import merge_seeds
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tracking.types import Direction, PropagationResult, Seed


@dataclass
class RunSpec:
    """What to propagate and where to write it.

    Attributes
    ----------
    image, target : napari layers
        The image walked and the Labels layer written.
    axis : int
        The leading axis walked; ``fixed`` holds the other leading axes' indices, in order.
    seeds : dict[int, list[Seed]]
        Per object id (the label value written), its seed slices.
    direction, index_range, stop_after
        As in :func:`~napari_sam3_onnx.api.propagate.iter_propagate`.
    overwrite : bool
        Write over other objects' pixels.
    replace : frozenset of int
        Objects whose earlier pixels this run replaces (a re-propagation from corrections, or
        of label ids already in the target).
    previous : dict[int, set[int]]
        For ``replace`` objects: the slices the earlier run wrote them on (cleared where this
        run, if it completes, no longer reaches).
    correction : bool
        A re-run of the last run's objects from corrections (it updates that run's record).
    prompts : dict[str, dict]
        The click-preview chains of prompt seeds, ``"oid:k"`` -> JSON (the commit log's
        :func:`~napari_sam3_onnx._napari.commit_entries.seed_prompts`), for replay.
    """

    image: Image
    target: Labels
    axis: int
    fixed: tuple[int, ...]
    seeds: dict[int, list[Seed]]
    direction: Direction = "both"
    index_range: tuple[int, int] | None = None
    stop_after: int | None = 2
    overwrite: bool = False
    replace: frozenset[int] = frozenset()
    previous: dict[int, set[int]] = field(default_factory=dict)
    correction: bool = False
    prompts: dict[str, dict] = field(default_factory=dict)


class LastRun:
    """The tab's last run, kept so a correction can re-run its objects with one more seed.

    Attributes
    ----------
    spec : RunSpec or None
        The last run (its seeds updated by every re-run from corrections).
    slices : dict[int, set[int]]
        Per object, the slices its current result lies on.
    """

    def __init__(self) -> None:
        self.spec: RunSpec | None = None
        self.slices: dict[int, set[int]] = {}

    def remember(self, spec: RunSpec, slices: Mapping[int, set[int]], complete: bool) -> None:
        """Record a finished run (``complete``: not cancelled, no error)."""
        if spec.correction and self.spec is not None:  # update the corrected objects
            self.spec.seeds.update(spec.seeds)
            self.spec.prompts.update(spec.prompts)
            for oid in spec.replace:
                old = set() if complete else self.slices.get(oid, set())
                self.slices[oid] = old | set(slices.get(oid, set()))
            return
        self.spec = spec
        self.slices = {oid: set(s) for oid, s in slices.items()}

    def correction(self, now: RunSpec, fixes: Mapping[int, Prompt], k: int) -> RunSpec:
        """The re-run for corrections ``fixes`` (object id -> prompt) on slice ``k``.

        ``now`` is a spec from the tab's current controls: it must be on the last run's image,
        target, axis and position; its overwrite choice is used, everything else is the last
        run's. Raises ``ValueError`` (with a message for people) otherwise.
        """
        last = self.spec
        if last is None:
            raise ValueError("Run a propagation first, then fix a slice with clicks.")
        if (now.image, now.target, now.axis, now.fixed) != (
                last.image, last.target, last.axis, last.fixed):
            raise ValueError("Corrections go on the image, target layer and axis of the last "
                             "run (and the same position on other axes).")
        seeds = merge_seeds(last.seeds, {o: Seed(k, prompt=p) for o, p in fixes.items()})
        return replace(last, seeds=seeds, overwrite=now.overwrite, replace=frozenset(seeds),
                       previous={o: set(self.slices.get(o, ())) for o in seeds}, correction=True)

    def forget(self, layer) -> None:
        """Drop the record if ``layer`` (removed from the viewer) was its image or target."""
        if self.spec is not None and layer in (self.spec.image, self.spec.target):
            self.spec, self.slices = None, {}


def slice_refs(spec: RunSpec, data_version: Hashable) -> list[SliceRef]:
    """One reference per position along the walked axis (keys shared with the click cache)."""
    return layers.refs_along(spec.image, spec.axis, spec.fixed, data_version)


class PropagationRunner(QObject):
    """Runs one propagation at a time for the Propagate tab.

    Parameters
    ----------
    viewer : napari.Viewer
        The viewer holding the image and the target.
    parent : QObject, optional
        The tab.
    progress : QProgressBar, optional
        The tab's bar (shown while a run is out).

    Signals
    -------
    slice_written(int)
        A slice arrived and was written (its index along the axis).
    applied()
        A batch of slices was written (after its ``slice_written`` signals).
    done(object, object)
        ``(PropagationResult or None, exception or None)`` after the run was closed (its spec
        is then :attr:`finished_spec`).
    """

    slice_written = Signal(int)
    applied = Signal()
    done = Signal(object, object)

    def __init__(self, viewer, parent: QObject | None = None,
                 progress: QProgressBar | None = None) -> None:
        super().__init__(parent)
        self.viewer = viewer
        self.spec: RunSpec | None = None
        self.finished_spec: RunSpec | None = None
        self.writer: RunWriter | None = None
        self._entry: dict | None = None  # the run's commit-log entry
        self.job = GeneratorRun(self._apply_steps, progress=progress, parent=self)

    @property
    def running(self) -> bool:
        """A run is in progress."""
        return self.spec is not None

    @property
    def result(self) -> PropagationResult | None:
        """What the last run returned (None while it runs, or after an error)."""
        return self.job.result

    @property
    def error(self) -> BaseException | None:
        """What the last run raised."""
        return self.job.error

    def cancel(self) -> None:
        """Ask the run to stop before its next slice (what is done stays written)."""
        self.job.cancel()

    def start(self, spec: RunSpec, workspace: Workspace, total: int = 0) -> None:
        """Start ``spec`` on the workspace's model and encoder in a worker (one run at a time).

        The slices' references carry the image's data version, so they share the cache keys
        of the other tabs (a plane the Clicks or Text tab encoded is not encoded again).
        ``total`` is the progress bar's range (slices the run may reach).
        """
        if self.running:
            raise RuntimeError("a propagation is already running")
        self.spec = spec
        self.writer = RunWriter(spec.target, spec.axis, spec.fixed, spec.overwrite, spec.replace)
        self._entry = propagate_entry(workspace, spec)
        refs = slice_refs(spec, workspace.versions.get(spec.image.unique_id))
        self.job.start(iter_propagate, workspace, refs, spec.seeds, direction=spec.direction,
                       index_range=spec.index_range, stop_after_absent=spec.stop_after,
                       total=total, on_done=lambda _job: self._on_finish())

    # ---- Qt thread -------------------------------------------------------------------
    def _apply_steps(self, steps: list[PropagationStep]) -> None:
        """Write a batch of slices: one redraw per batch, only when a written slice is shown."""
        written = []
        for step in steps:
            if not self._on_step(step):
                break
            if step.outputs:
                written.append(int(step.index))
        spec, writer = self.spec, self.writer
        if spec is not None and writer is not None and spec.target in self.viewer.layers \
                and plane_shown(self.viewer, spec.image, [writer.lead(k) for k in written]):
            spec.target.refresh()
        self.applied.emit()

    def _on_step(self, step: PropagationStep) -> bool:
        spec, writer = self.spec, self.writer
        if spec is None or writer is None:
            return False
        if step.outputs is None:
            return True
        if spec.target not in self.viewer.layers or spec.image not in self.viewer.layers:
            self.job.cancel()  # the layers are gone: stop; nothing more is written
            return False
        writer.write(step.index, step.outputs, refresh=False)
        self.slice_written.emit(int(step.index))
        return True

    def _on_finish(self) -> None:
        spec, writer, result = self.spec, self.writer, self.job.result
        if spec is None or writer is None:
            return
        if result is not None and not result.cancelled and spec.target in self.viewer.layers:
            for oid in spec.replace:  # slices the earlier run reached and this one did not
                for k in sorted(spec.previous.get(oid, set()) - writer.slices.get(oid, set())):
                    writer.clear(k, [oid])
        complete = result is not None and not result.cancelled
        writer.finish(None if self._entry is None else
                      propagate_finished(self._entry, writer.steps, complete))
        self.spec, self.finished_spec = None, spec
        self.done.emit(result, self.job.error)
