"""The "Automatic" tab: every object on a slice, a stack or a range, without prompts.

A run is :func:`~napari_sam3_onnx.api.automatic.iter_segment_refs` (the same loop as
``api.segment_all`` and ``segment-all``) in napari's thread pool, on the shared, single-flight
embedding cache, with the dock's tiling ("Tile large planes": planes above the threshold are
segmented tile by tile, and the status line says into how many tiles, :mod:`.tiling_note`);
for a stack, the mode "tracked from key plane" (:mod:`.mode`) runs
:func:`~napari_sam3_onnx.api.automatic_tracked.iter_segment_tracked` instead (the loop of
``segment-all --propagate-from``). Finished planes appear in a preview layer (:mod:`.output`),
Commit writes them into the target as one undo step. SAM's generator settings are folded away under
"Settings". "Evaluate" compares two Labels layers (e.g. a commit against ground truth) and
prints the table ``napari-sam3-onnx evaluate`` prints.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial

import numpy as np
from napari.layers import Labels
from qtpy.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.automatic.mode import (
    ModeControl,
    TrackedJob,
    iter_tracked,
    tracked_job,
    tracked_message,
)
from napari_sam3_onnx._napari.automatic.output import PREVIEW, AutoOutput, nothing_found
from napari_sam3_onnx._napari.automatic.settings_box import SettingsBox
from napari_sam3_onnx._napari.automatic.tiling_note import bracketed, tiling_note
from napari_sam3_onnx._napari.commit_entries import automatic_entry, committed
from napari_sam3_onnx._napari.generator_run import GeneratorRun, plane_shown
from napari_sam3_onnx._napari.hints import contrast_hint
from napari_sam3_onnx._napari.host import DockHost, follow_dock
from napari_sam3_onnx._napari.qt_widgets import wrapped_label
from napari_sam3_onnx._napari.text.controls import ScopeControl
from napari_sam3_onnx._napari.text.output import target_choices
from napari_sam3_onnx.api.automatic import AutoStep, iter_segment_refs
from napari_sam3_onnx.api.automatic_tracked import TrackedRun
from napari_sam3_onnx.api.evaluate import evaluate
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import Sam3OnnxError

NEW_LAYER = "new layer"
NO_MODEL = "Load a bundle that takes clicks above to segment every object automatically."


class AutoPanel(QWidget):
    """The Automatic tab (``host`` is the main widget; see :mod:`.panels`)."""

    def __init__(self, host: DockHost, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host, self.viewer = host, host.viewer
        self.output: AutoOutput | None = None
        self.messages: list[str] = []
        self._total = 0
        self._note = ""  # what the run's tiling is (tiling_note), said when it ends
        self._job: TrackedJob | None = None  # the tracked run's planes (None: per plane)
        self._tracked: TrackedRun | None = None  # what the tracked run returned
        self._run_info: tuple = ()  # (settings, first slice's ref) of the run
        self._entry: dict = {}  # the run's commit-log entry (made as it starts)
        self.explain = wrapped_label(NO_MODEL)
        self.mode = ModeControl()
        self.mode.mode.currentIndexChanged.connect(lambda _i: self._mode_changed())
        self.scope = ScopeControl()
        self.fold = QToolButton()
        self.fold.setText("Settings")
        self.fold.setCheckable(True)
        self.fold.setToolTip("How the slice is covered with clicks and which masks are kept "
                             "(SAM's automatic mask generator; its defaults)")
        self.settings = SettingsBox()
        self.settings.setVisible(False)
        self.fold.toggled.connect(self.settings.setVisible)
        self.target = QComboBox()
        self.run_button = QPushButton("Preview")
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.commit_button = QPushButton("Commit")
        self.commit_button.clicked.connect(self.commit)
        self.discard_button = QPushButton("Discard")
        self.discard_button.clicked.connect(self.discard)
        for idle in (self.cancel_button, self.commit_button, self.discard_button):
            idle.setEnabled(False)  # nothing to cancel, commit or discard yet
        self.pred_layer, self.truth_layer = QComboBox(), QComboBox()
        self.evaluate_button = QPushButton("Evaluate")
        self.evaluate_button.clicked.connect(self.evaluate)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = host.status  # one status line for the whole dock
        self.runner = GeneratorRun(self._apply_planes, progress=self.progress,
                                notify=lambda m: self._say(m, warn=True), parent=self)
        self.table = QLabel("")  # no wrapping: the table's columns must line up
        self.table.setStyleSheet("font-family: monospace")

        form = QFormLayout()
        form.addRow(self.mode)
        form.addRow("Slices", self.scope)
        form.addRow(self.fold)
        form.addRow(self.settings)
        form.addRow("Commit to", self.target)
        buttons = QHBoxLayout()
        for b in (self.run_button, self.cancel_button, self.commit_button, self.discard_button):
            buttons.addWidget(b)
        ev = QHBoxLayout()
        for w in (self.pred_layer, QLabel("vs"), self.truth_layer, self.evaluate_button):
            ev.addWidget(w)
        layout = QVBoxLayout(self)
        layout.addWidget(self.explain)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(QLabel("Evaluate labels against ground truth:"))
        layout.addLayout(ev)
        layout.addWidget(self.table)
        layout.addStretch(1)

        follow_dock(self, host, self.refresh, self._layers_changed, self.runner.gate.stop)
        self.refresh()

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self.runner.running

    def refresh(self) -> None:
        """Enable what the loaded bundle allows; explain what it does not."""
        adapter = self.host.model.adapter
        reason = None
        if adapter is None:
            reason = NO_MODEL
        elif not adapter.has(Capability.CLICKS):
            reason = (f"The {adapter.layout} bundle has no SAM head for clicks, so it cannot "
                      "segment automatically; use the Text tab, or a tracker bundle.")
        reason = reason or self.host.model.checking  # a store still being checked
        self.explain.setText(reason or "")
        self.explain.setVisible(reason is not None)
        idle = not self.running
        self.run_button.setEnabled(reason is None and idle)
        self.cancel_button.setEnabled(self.running)
        held = self.output is not None and idle and self.output.objects > 0
        self.commit_button.setEnabled(held)
        self.discard_button.setEnabled(self.output is not None and idle)
        image = self.host.session.image
        self.scope.set_shape(() if image is None else layers.plane_shape(image)[: image.ndim - 2])
        self.mode.update_for(image, adapter)
        self._mode_changed()
        self._layers_changed()

    def _mode_changed(self) -> None:
        """Tracked runs walk the whole stack from the key slice: the scope and link do not apply."""
        tracked = self.mode.tracked
        self.scope.setEnabled(not tracked)
        self.scope.setToolTip("The tracked mode walks the whole stack from the key slice."
                              if tracked else "")
        for w in (self.settings.link, self.settings.link_iou):
            w.setEnabled(not tracked)

    def _layers_changed(self, event=None) -> None:
        image = self.host.session.image
        skip = None if self.output is None else self.output.preview
        lay = self.host.session.layers
        choices = [la for la in target_choices(self.viewer, image, skip)
                   if lay is None or la is not lay.preview]
        _fill(self.target, [(NEW_LAYER, None)] + [(la.name, la) for la in choices])
        every = [(la.name, la) for la in self.viewer.layers if isinstance(la, Labels)
                 and not layers.is_scratch(la) and la.name != PREVIEW]  # no scratch layers
        _fill(self.pred_layer, every)
        _fill(self.truth_layer, every)
        if len(every) > 1 and self.truth_layer.currentData() is self.pred_layer.currentData():
            self.truth_layer.setCurrentIndex(1 if self.pred_layer.currentIndex() == 0 else 0)

    # ---- running ------------------------------------------------------------------------
    def run(self) -> None:
        """Segment the chosen planes (or track the key slice's objects) into a fresh preview."""
        session, image, encoder = self.host.session, self.host.session.image, \
            self.host.session.encoder
        if self.running:
            return
        if image is None or encoder is None:
            self._say("Choose an image and load a bundle first.", warn=True)
            return
        version = session.data_version(image)
        try:
            settings = self.settings.settings()
            current = layers.current_index(self.viewer, image)
            job = tracked_job(image, current, self.mode.key_choice, version) \
                if self.mode.tracked else None
            indices = [] if job is not None else self.scope.indices(current)
        except (Sam3OnnxError, ValueError) as exc:
            self._say(str(exc), warn=True)
            return
        refs = job.refs if job is not None else \
            [layers.slice_ref(image, i, version) for i in indices]
        previous = None if self.output is None else self.output.preview
        self.output = AutoOutput(self.viewer, image, reuse=previous)  # the preview reused
        tiling = self.host.model.workspace.tiling  # the dock's switch, read once per run
        self._note = tiling_note(encoder.adapter, refs[0].plane_shape, tiling,
                                 "on the key slice" if job is not None else "per plane")
        self._job, self._tracked, self._total = job, None, len(refs)
        self._run_info = (settings, refs[0])
        self._entry = automatic_entry(self.host.model.workspace, image, refs, asdict(settings),
                                      None if job is not None else self.settings.link_value,
                                      None if job is None else job.key)
        work: tuple  # the worker's generator function and its arguments
        if job is None:  # the API's loop on the shared (single-flight) embedding cache
            embed = partial(encoder.embed, need=Capability.ENCODE)  # the automatic's encoder
            work = (iter_segment_refs, encoder.adapter, embed, refs, settings,
                    self.settings.link_value, 1, tiling)
        else:
            work = (iter_tracked, self.host.model.workspace, job, settings)
        self.runner.start(*work, total=len(refs),
                       on_done=lambda _job: self._on_finished())
        self.refresh()
        grid = (f"a {settings.points_per_side} x {settings.points_per_side} click grid"
                f"{bracketed(self._note)}")
        if job is None:
            self._say(f"Segmenting {len(refs)} slice(s) of '{image.name}' with {grid}...")
        else:
            self._say(f"Segmenting the key slice {layers.index_label(image, job.key_index)} "
                      f"of '{image.name}' with {grid}, then carrying its objects through "
                      f"{len(refs)} slice(s)...")

    def cancel(self) -> None:
        """Stop after the decoder batch in progress; finished planes stay in the preview."""
        if self.running:
            self.runner.cancel()
            self._say("Cancelling...")

    def _apply_planes(self, steps: list[AutoStep]) -> None:
        """Show a batch of finished planes (:class:`~.generator_run.GeneratorRun`).

        The preview is redrawn once per batch, and only when a written plane is on screen.
        """
        out = self.output
        if out is None:
            return
        for step in steps:
            if not out.add(step.index, step.result, refresh=False):
                self.runner.cancel()
                self._say("The preview layer was removed; the run stopped.", warn=True)
                return
        out.refresh(redraw=plane_shown(self.viewer, out.image, [s.index for s in steps]),
                    final=False)
        step = steps[-1]
        if not self.runner.news_due():
            return
        self.runner.set_progress(step.done)
        tiles = f" on {step.tiles} tiles" if step.tiles > 1 else ""
        self.status.setText(f"{layers.index_label(out.image, step.index)}: "
                            f"{len(step.result.instances)} object(s){tiles}; {step.done} of "
                            f"{step.total} slice(s) done.")

    def _on_finished(self) -> None:
        value = self.runner.result
        self._tracked = value if isinstance(value, TrackedRun) else None
        out, job = self.output, self._job
        if out is not None:
            out.refresh(redraw=False)  # the features table complete
        if out is not None and job is not None:
            if self._tracked is not None:  # an error has been said already
                self._say(tracked_message(self._tracked, job, out.objects, len(out.planes)))
        elif out is not None:
            head = (f"Cancelled after {len(out.planes)} of {self._total} slice(s). "
                    if len(out.planes) < self._total else "")
            settings, ref = self._run_info
            if out.planes and not out.objects:
                self._say(head + nothing_found(settings, len(out.planes), contrast_hint(ref)))
            else:
                self._say(f"{head}{out.objects} object(s) in the preview{bracketed(self._note)}; "
                          "Commit writes them (one undo step), Discard drops them.")
        self.refresh()

    def commit(self) -> None:
        """Write the preview into the target layer as one undo step."""
        out = self.output
        if out is None or self.running or not out.planes:
            return
        if not out.objects:  # never an empty layer
            self._say("The preview holds no object: nothing to commit.", warn=True)
            return
        layer, n = out.commit(self.target.currentData(),
                              committed(self._entry, [index for index, _ in out.planes]))
        self.output = None
        self._say(f"{n} object(s) written to '{layer.name}'. One undo (Ctrl+Z on that layer) "
                  f"removes them.{out.kept}")
        self.refresh()

    def discard(self) -> None:
        """Drop the preview."""
        if self.output is not None and not self.running:
            self.output.discard()
            self.output = None
            self._say("Preview discarded.")
            self.refresh()

    def evaluate(self) -> None:
        """Print the evaluation of one Labels layer against another."""
        pred, truth = self.pred_layer.currentData(), self.truth_layer.currentData()
        if pred is None or truth is None:
            self._say("Choose the labels to evaluate and the ground truth.", warn=True)
            return
        try:
            report = evaluate(np.asarray(pred.data), np.asarray(truth.data), names=[pred.name])
        except (Sam3OnnxError, ValueError) as exc:
            self._say(str(exc), warn=True)
            return
        self.table.setText(report.text())
        self._say(f"'{pred.name}' against '{truth.name}': mSA {report.overall.msa:.3f}.")

    def _say(self, message: str, warn: bool = False) -> None:
        """The dock's status line; ``warn``: also a pop-up (something stopped the user)."""
        self.messages = [*self.messages[-49:], message]
        (self.host.notify if warn else self.host.inform)(message)


def _fill(combo: QComboBox, items) -> None:
    current = combo.currentData()
    combo.blockSignals(True)
    combo.clear()
    for title, data in items:
        combo.addItem(title, data)
    datas = [d for _, d in items]
    if current in datas:
        combo.setCurrentIndex(datas.index(current))
    combo.blockSignals(False)
