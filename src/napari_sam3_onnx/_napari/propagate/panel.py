"""The "Propagate" tab: carry objects from the current slice through z (or t).

Objects come from the click preview or from label ids on the current slice of the target
layer; they are carried together (one encode per slice, shared with clicks and text) in a
background worker and written into the target layer slice by slice, as one undo step. After a
run, a slice fixed with clicks (previewed, not committed) becomes one more seed of its object:
"Re-propagate from corrections" recomputes that object between its seeds and replaces its
earlier result.
"""

from __future__ import annotations

import numpy as np
from qtpy.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.commit_entries import seed_prompts
from napari_sam3_onnx._napari.compact import compact, compact_combo
from napari_sam3_onnx._napari.host import DockHost
from napari_sam3_onnx._napari.propagate.run import LastRun, PropagationRunner, RunSpec
from napari_sam3_onnx._napari.propagate.seed_preview import (
    finished_message,
    preview_objects,
    preview_seeds,
    run_problem,
)
from napari_sam3_onnx.api.propagation_report import axis_names, method_text
from napari_sam3_onnx.api.propagation_seeds import label_seeds, match_corrections, parse_ids
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.tracking.types import Direction
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import Sam3OnnxError

DIRECTIONS: tuple[tuple[str, Direction], ...] = (
    ("both", "both"), ("up", "forward"), ("down", "backward"))


class PropagationPanel(QWidget):
    """The Propagate tab (see the module docstring).

    Parameters
    ----------
    host : SamDock
        The main widget: its ``viewer``, ``session`` and ``model`` are shared.
    """

    def __init__(self, host: DockHost, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host, self.viewer = host, host.viewer
        self.workspace: Workspace = host.model.workspace
        self._reached: set[int] = set()  # distinct slices of the run so far
        self.last = LastRun()  # for corrections

        self.method, self.note = QLabel(""), QLabel("")
        for label in (self.method, self.note):
            label.setWordWrap(True)
        self.from_preview = QRadioButton("Previewed object(s) on this slice")
        self.from_preview.setChecked(True)
        self.from_ids = QRadioButton("Label ids on this slice:")
        self.from_ids.setToolTip(
            "Ids of the 'Commit to' layer (any Labels layer of the image's shape). On each slice "
            "the run reaches, an id's old pixels give way to its propagated ones; slices it does "
            "not reach (behind the seed when walking one way) keep theirs.")
        self.from_all = QRadioButton("All labels on this slice")
        self.ids = QLineEdit()
        self.ids.setPlaceholderText("ids: 3, 7")
        objects = QGridLayout()
        objects.addWidget(self.from_preview, 0, 0, 1, 2)
        objects.addWidget(self.from_ids, 1, 0)
        objects.addWidget(self.ids, 1, 1)
        objects.addWidget(self.from_all, 2, 0, 1, 2)
        group = QGroupBox("Objects to carry")
        group.setLayout(objects)

        self.axis = compact_combo()
        self.axis.currentIndexChanged.connect(lambda _i: self._axis_changed())
        self.direction = compact_combo()
        self.whole = QCheckBox("Whole stack")
        self.whole.setChecked(True)
        self.start, self.stop = compact(QSpinBox()), compact(QSpinBox())
        self.whole.toggled.connect(lambda on: [w.setEnabled(not on) for w in (self.start,
                                                                                self.stop)])
        for w in (self.start, self.stop):
            w.setEnabled(False)
        span = QHBoxLayout()
        for w in (QLabel("from"), self.start, QLabel("to"), self.stop):
            span.addWidget(w)
        self.stop_after = compact(QSpinBox())
        self.stop_after.setRange(0, 999)
        self.stop_after.setValue(2)
        self.stop_after.setSpecialValueText("never")
        self.stop_after.setSuffix(" absent slices")
        self.overwrite = QCheckBox("Overwrite other objects")
        form = QFormLayout()
        form.addRow("Walk along", self.axis)
        form.addRow("Direction", self.direction)
        form.addRow("Range", self.whole)
        form.addRow("", span)  # a row of its own: the dock stays narrow
        form.addRow("Stop after", self.stop_after)
        form.addRow(self.overwrite)

        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.correct_button = QPushButton("Re-propagate from corrections")
        self.correct_button.setToolTip(
            "Fix a slice of a propagated object with clicks or a box in 'Clicks & boxes' (do "
            "not commit), then press this: that slice becomes one more seed and the object is "
            "recomputed between its seeds, replacing its earlier result.")
        self.correct_button.clicked.connect(self.repropagate)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = host.status  # one status line for the whole dock
        self.runner = PropagationRunner(self.viewer, self, progress=self.progress)
        self.runner.slice_written.connect(self._slice_done)
        self.runner.applied.connect(self._batch_applied)
        self.runner.done.connect(self._done)

        layout = QVBoxLayout(self)
        for w in (self.method, self.note, group):
            layout.addWidget(w)
        layout.addLayout(form)
        layout.addLayout(buttons)
        for w in (self.correct_button, self.progress):
            layout.addWidget(w)
        layout.addStretch(1)

        host.image.currentIndexChanged.connect(lambda _i: self.refresh())
        host.tabs.currentChanged.connect(lambda _i: self.refresh())
        self.viewer.layers.events.removed.connect(self._on_removed)
        host.model.loaded.connect(self.refresh)
        self.refresh()

    # ---- state -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """A propagation is in progress."""
        return self.runner.running

    def _problem(self) -> str:
        """Why Run cannot start now ('' if it can)."""
        if self.host.model.checking is not None:  # a store still being checked
            return self.host.model.checking
        session = self.host.session
        return run_problem(self.workspace.adapter, self.workspace.encoder, session.image)

    def refresh(self) -> None:
        """Update the method line, the axis choices and which buttons work."""
        adapter, image = self.workspace.adapter, self.host.session.image
        memory = adapter is not None and adapter.has(Capability.MEMORY)
        note = adapter.memory_graphs.memory_note if adapter is not None and memory else ""
        self.method.setText("" if adapter is None else "Method: " + method_text(
            "memory" if memory else "carry-over") + (f"; {note}" if note else ""))
        problem = self._problem()
        self.note.setText(problem)
        self.note.setVisible(bool(problem))
        lead = 0 if image is None else len(layers.plane_shape(image)) - 2
        names = axis_names(lead) if lead > 0 else ()
        if [self.axis.itemText(i) for i in range(self.axis.count())] != list(names):
            self.axis.blockSignals(True)
            self.axis.clear()
            self.axis.addItems(names)
            self.axis.setCurrentIndex(len(names) - 1)  # z by default
            self.axis.blockSignals(False)
            self._axis_changed()
        self.axis.setEnabled(lead > 1)
        idle = not self.running
        self.run_button.setEnabled(idle and not problem)
        self.correct_button.setEnabled(idle and not problem and self.last.spec is not None)
        self.cancel_button.setEnabled(not idle)

    def _axis_changed(self) -> None:
        image, name = self.host.session.image, self.axis.currentText() or "z"
        n = 1 if image is None or self.axis.currentIndex() < 0 else \
            layers.plane_shape(image)[self.axis.currentIndex()]
        for i, (text, _) in enumerate(DIRECTIONS):  # keep the choice, rename the axis
            label = {"up": f"up (increasing {name})", "down": f"down (decreasing {name})"}
            if self.direction.count() < len(DIRECTIONS):
                self.direction.addItem(text)
            self.direction.setItemText(i, label.get(text, text))
        for w in (self.start, self.stop):
            w.setRange(0, max(n - 1, 0))
        self.start.setValue(0)
        self.stop.setValue(max(n - 1, 0))

    # ---- actions ---------------------------------------------------------------------
    def run(self) -> bool:
        """Start a propagation from the current slice; returns whether it started."""
        try:
            spec = self._spec()
            if self.from_preview.isChecked():
                spec.seeds = preview_seeds(self.host.session, self._index(), self._k(),
                                           spec.target.data)
                spec.prompts = seed_prompts(self.host.session, spec.seeds, self._index())
            else:
                ids = parse_ids(self.ids.text()) if self.from_ids.isChecked() else None
                plane = spec.target.data[self._index()]
                spec.seeds = label_seeds(plane, self._k(), ids)
                # Re-propagating labels that are there: each slice the run reaches gets the
                # id's new pixels in place of its old ones; other slices keep theirs.
                spec.replace = frozenset(spec.seeds)
        except Sam3OnnxError as exc:
            self._warn(str(exc))
            return False
        return self._start(spec, clear_preview=self.from_preview.isChecked())

    def repropagate(self) -> bool:
        """Re-run the last run's objects with the previewed corrections on this slice."""
        try:
            now = self._spec()
            if self.last.spec is None:
                raise Sam3OnnxError("Run a propagation first, then fix a slice with clicks.")
            objects = preview_objects(self.host.session, self._index())
            hint = parse_ids(self.ids.text()) if self.ids.text().strip() else []
            plane = np.asarray(now.target.data[self._index()])
            fixes = match_corrections(objects, plane, sorted(self.last.spec.seeds), hint)
            spec = self.last.correction(now, fixes, self._k())
            spec.prompts = {**spec.prompts, **seed_prompts(
                self.host.session, {o: [s for s in spec.seeds[o] if s.index == self._k()]
                                    for o in fixes}, self._index())}
        except (Sam3OnnxError, ValueError) as exc:
            self._warn(str(exc))
            return False
        return self._start(spec, clear_preview=True)

    def cancel(self) -> None:
        """Stop the run before its next slice; finished slices stay written."""
        if self.running:
            self.runner.cancel()
            self._say("Cancelling after the current slice...")

    # ---- helpers ---------------------------------------------------------------------
    def _index(self) -> tuple[int, ...]:
        return layers.current_index(self.viewer, self.host.session.image)

    def _k(self) -> int:
        return self._index()[self.axis.currentIndex()]

    def _spec(self) -> RunSpec:
        """A spec from the controls (seeds still empty); raises with a message if not ready."""
        self.refresh()
        problem = self._problem()
        if problem or self.running:
            raise Sam3OnnxError(problem or "A propagation is already running.")
        lay, axis = self.host.session.layers, self.axis.currentIndex()
        if lay is None:
            raise Sam3OnnxError("Choose an image in the widget first.")
        index = self._index()
        target = layers.restore_labels(self.viewer, lay, "target")
        lo, hi = self.start.value(), self.stop.value()
        if not self.whole.isChecked() and lo > hi:
            raise Sam3OnnxError(f"The range is empty: from {lo} to {hi}.")
        return RunSpec(
            lay.image, target, axis, index[:axis] + index[axis + 1:], {},
            DIRECTIONS[self.direction.currentIndex()][1],
            None if self.whole.isChecked() else (lo, hi + 1),
            self.stop_after.value() or None, self.overwrite.isChecked())

    def _start(self, spec: RunSpec, clear_preview: bool) -> bool:
        ids = ", ".join(map(str, sorted(spec.seeds)))
        n = layers.plane_shape(spec.image)[spec.axis]
        lo, hi = spec.index_range or (0, n)
        total = len(range(max(lo, 0), min(hi, n)))  # each slice once, the seed's included
        self._reached = set()
        self.progress.setFormat(f"0 / {total} slices")
        self._say(f"Propagating object(s) {ids} along {self.axis.currentText()}...")
        self.runner.start(spec, self.workspace, total)
        if clear_preview:  # the previewed objects are now seeds (as a commit would do)
            self.host.session.clear()
        self.refresh()
        return True

    def _slice_done(self, k: int) -> None:
        """A slice was written: count it once, whichever pass reached it."""
        self._reached.add(k)

    def _batch_applied(self) -> None:
        """The bar shows the distinct slices reached, once per batch."""
        if not self.runner.job.news_due():
            return
        done = len(self._reached)
        self.runner.job.set_progress(done, f"{done} / {self.progress.maximum()} slices")

    def _done(self, result, error) -> None:
        spec, writer = self.runner.finished_spec, self.runner.writer
        if spec is None or writer is None:  # pragma: no cover - the runner sets both first
            return
        alive = spec.target in self.viewer.layers and spec.image in self.viewer.layers
        if alive and (result is not None or writer.slices):
            self.last.remember(spec, writer.slices, complete=result is not None
                               and not result.cancelled)
        name = axis_names(len(layers.plane_shape(spec.image)) - 2)[spec.axis]
        message = finished_message(result, error, writer, name, spec.stop_after)
        (self._warn if error is not None else self._say)(message)
        self.refresh()

    def _on_removed(self, event) -> None:
        spec = self.runner.spec
        if spec is not None and event.value in (spec.image, spec.target):
            self.runner.cancel()
        self.last.forget(event.value)
        self.refresh()

    def _say(self, message: str) -> None:
        """Routine news: the dock's status line."""
        self.host.inform(message)

    def _warn(self, message: str) -> None:
        """Something that stopped the user: a pop-up and the status line."""
        self.host.notify(message)
