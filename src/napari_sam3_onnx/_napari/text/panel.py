"""The "Text" tab: every instance of a concept ("nucleus, mitochondrion") on a slice or stack.

Instances are written as labels, one id each, with a score per instance in the features table.

The tab shares the dock's workspace (model, encoder and embedding cache, language cache,
tiling; :mod:`~napari_sam3_onnx.api.workspace`), image and 'SAM boxes' layer. It only turns
layers into slice references and exemplars, and results into layer writes: a run is the API's
search workflow (:func:`~napari_sam3_onnx.api.search.iter_search`, one step per slice) in
napari's thread pool (:class:`~napari_sam3_onnx._napari.generator_run.GeneratorRun`: paced
results, progress, Cancel within one slice);
:class:`~napari_sam3_onnx._napari.text.output.TextOutput` writes finished slices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qtpy.QtWidgets import (
    QCheckBox,
    QFormLayout,
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
from napari_sam3_onnx._napari.commit_entries import text_entry
from napari_sam3_onnx._napari.compact import compact, compact_combo
from napari_sam3_onnx._napari.generator_run import GeneratorRun, plane_shown
from napari_sam3_onnx._napari.hints import contrast_hint
from napari_sam3_onnx._napari.host import DockHost, follow_dock
from napari_sam3_onnx._napari.text.controls import FloorControl, ScopeControl
from napari_sam3_onnx._napari.text.inputs import (
    EXEMPLAR,
    long_prompt_warnings,
    phrases,
    plane_exemplars,
    set_exemplar_polarity,
)
from napari_sam3_onnx._napari.text.output import TextOutput, summary, target_choices
from napari_sam3_onnx.api.search import SearchStep, iter_search
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.automatic.linking import LINK_IOU
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import Sam3OnnxError

RUN_LAYER = "the run's layer (the next run replaces it)"
NEW_LAYER = "a new layer per run"
NO_MODEL = ("To find every object of a kind by typing its name, load a model that reads text "
            "above: Download... lists them (the toy model works on the sample).")


@dataclass(frozen=True)
class _Run:
    """What the finished-run message needs: the planes, phrases and floor of the run."""

    refs: Sequence[SliceRef]
    concepts: Sequence[str]
    floor: float


class TextPanel(QWidget):
    """The Text tab (``host`` is the main widget; see :mod:`.panels`)."""

    def __init__(self, host: DockHost, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host, self.viewer = host, host.viewer
        self.workspace: Workspace = host.model.workspace
        self.texts: TextCache | None = None
        self.output: TextOutput | None = None
        self._entry: dict | None = None  # the run's commit-log entry
        self.messages: list[str] = []
        self._reason: str | None = NO_MODEL
        self._run_layer = None  # the layer the last run made (reused by the next)

        self.explain = QLabel(NO_MODEL)
        self.explain.setWordWrap(True)
        self.concepts = QLineEdit()
        self.concepts.setPlaceholderText("nucleus, mitochondrion")
        self.concepts.setToolTip("Comma-separated noun phrases; each becomes its own class.")
        self.concepts.returnPressed.connect(self.run)
        self.use_boxes = QCheckBox("Boxes are exemplars")
        self.use_boxes.setToolTip("Rectangles in 'SAM boxes' are exemplars of the concept on "
                                  "their slice (positive or negative, below).")
        self.positive = QRadioButton("Positive")
        self.positive.setChecked(True)
        self.negative = QRadioButton("Negative")
        self.positive.toggled.connect(lambda _on: self._polarity())
        self.use_boxes.toggled.connect(lambda _on: self._polarity())
        self.floor = FloorControl()
        self.scope = ScopeControl()
        self.min_size = compact(QSpinBox())
        self.min_size.setRange(0, 10**8)
        self.min_size.setSuffix(" px")
        self.fill_holes = QCheckBox("Fill holes")
        self.link = QCheckBox("Link through the stack")
        self.link.setChecked(True)
        self.link.setToolTip("One id per object through the slices: an instance takes the id of "
                             f"the previous slice's instance it overlaps most (IoU > {LINK_IOU}).")
        self.target = compact_combo()
        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = host.status  # one status line for the whole dock
        self.runner = GeneratorRun(self._apply_slices, progress=self.progress,
                                notify=lambda m: self._say(m, warn=True), parent=self)

        polarity = QHBoxLayout()
        for w in (self.positive, self.negative):
            w.setToolTip("The polarity of the next exemplar boxes drawn.")
            polarity.addWidget(w)
        size = QHBoxLayout()
        size.addWidget(self.min_size)
        size.addWidget(self.fill_holes)
        size.addWidget(self.link)
        form = QFormLayout()
        form.addRow("Concepts", self.concepts)
        form.addRow(self.use_boxes)
        form.addRow("Exemplars", polarity)
        form.addRow("Score floor", self.floor)
        form.addRow("Slices", self.scope)
        form.addRow("Min size", size)
        form.addRow("Write to", self.target)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.explain)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addStretch(1)
        self._controls = (self.concepts, self.floor, self.scope, self.min_size, self.fill_holes,
                          self.link, self.target, self.run_button)

        follow_dock(self, host, self.refresh, self._layers_changed, self.runner.gate.stop)
        self.refresh()

    # ---- state -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether a search is in progress."""
        return self.output is not None

    def refresh(self) -> None:
        """Re-read the model and image: enable what this bundle can do, explain what it cannot."""
        adapter = self.workspace.adapter
        self._reason = None
        if adapter is None:
            self._reason = NO_MODEL
        elif not adapter.has(Capability.TEXT):
            self._reason = (
                f"The {adapter.layout} bundle has no language encoder and concept detector, so "
                "it cannot search by text. Load a SAM 3 concept export (wkentaro, samexporter, "
                "Autognosi, ComicApp) for the Text tab; clicks and boxes still work.")
        else:
            try:
                self.texts = self._text_cache(adapter)
            except Sam3OnnxError as exc:
                self.texts, self._reason = None, str(exc)
        self._reason = self._reason or self.host.model.checking  # a store still being checked
        self.explain.setText(self._reason or "")
        self.explain.setVisible(self._reason is not None)
        ok = self._reason is None and not self.running
        for w in self._controls:
            w.setEnabled(ok)
        exemplars = ok and adapter is not None and adapter.has(Capability.EXEMPLARS)
        for w in (self.use_boxes, self.positive, self.negative):
            w.setEnabled(exemplars)
        self.use_boxes.setToolTip("" if exemplars or adapter is None else
                                  f"The {adapter.layout} bundle takes no exemplar boxes.")
        self.cancel_button.setEnabled(self.running)
        if adapter is not None:
            self.floor.set_cut(float(adapter.concept_detector.min_score)
                               if adapter.has(Capability.TEXT) else 0.0)
        image = self.host.session.image
        self.scope.set_shape(() if image is None else layers.plane_shape(image)[: image.ndim - 2])
        self.link.setVisible(image is not None and image.ndim - (3 if image.rgb else 2) > 0)
        self._refresh_targets()
        lay = self.host.session.layers
        if lay is not None and EXEMPLAR not in lay.shapes.features:
            self._polarity()  # another image: its 'SAM boxes' layer has no polarity yet

    def _text_cache(self, adapter) -> TextCache:
        """The workspace's one language cache (the click session's for detector-only)."""
        texts = self.workspace.texts
        if texts.adapter is not adapter:
            raise Sam3OnnxError("The model changed while the Text tab was reading it; "
                                "load it again.")
        return texts

    def _layers_changed(self, event=None) -> None:
        out = self.output
        if out is not None and event is not None and layers.same(event.value, out.image):
            self.cancel()
            self._say(f"'{out.image.name}' was removed; the search stops after this slice.",
                      warn=True)
        self._refresh_targets()

    def _refresh_targets(self) -> None:
        lay, current = self.host.session.layers, self.target.currentData()
        choices = target_choices(self.viewer, self.host.session.image,
                                 None if lay is None else lay.preview)
        self.target.blockSignals(True)
        self.target.clear()
        self.target.addItem(RUN_LAYER, None)
        self.target.addItem(NEW_LAYER, NEW_LAYER)
        for layer in choices:
            self.target.addItem(layer.name, layer)
        if current in choices or current == NEW_LAYER:
            self.target.setCurrentIndex(self.target.findData(current))
        self.target.blockSignals(False)

    def _polarity(self) -> None:
        """New rectangles in 'SAM boxes' get the chosen polarity (feature and edge colour)."""
        lay = self.host.session.layers
        if lay is not None and self.use_boxes.isChecked():
            set_exemplar_polarity(lay.shapes, self.positive.isChecked())

    # ---- running -----------------------------------------------------------------------
    def run(self) -> None:
        """Start a search with the tab's settings (messages explain what is missing)."""
        if self.running:
            return
        session, adapter = self.host.session, self.workspace.adapter
        image, encoder = session.image, self.workspace.encoder
        if self._reason is not None or self.texts is None or encoder is None or adapter is None:
            self._say(self._reason or NO_MODEL, warn=True)
            return
        prompt_layers = session.layers
        if image is None or prompt_layers is None:
            self._say("Choose an image in the widget first.", warn=True)
            return
        try:
            indices = self.scope.indices(layers.current_index(self.viewer, image))
            exemplars = {} if not self.use_boxes.isChecked() else plane_exemplars(
                prompt_layers.shapes, image, indices,
                adapter.concept_detector.max_exemplars)
            concepts = phrases(self.concepts.text(), bool(exemplars))
        except Sam3OnnxError as exc:
            self._say(str(exc), warn=True)
            return
        if not concepts:  # exemplars alone: only the planes that have them
            indices = [i for i in indices if i in exemplars]
        for message in long_prompt_warnings(self.texts.tokenizer, concepts):
            self._say(message, warn=True)
        version = self.workspace.versions.get(image.unique_id)
        choice = self.target.currentData()
        output = TextOutput(self.viewer, image, None if choice == NEW_LAYER else choice,
                            concepts, reuse=self._run_layer if choice is None else None)
        run = _Run([layers.slice_ref(image, i, version) for i in indices], concepts,
                   self.floor.value)
        options = {"floor": run.floor, "exemplars": exemplars, "min_area": self.min_size.value(),
                   "fill_holes": self.fill_holes.isChecked(), "first_id": output.first_id,
                   "link_iou": LINK_IOU if self.link.isChecked() and len(indices) > 1 else None}
        self._entry = text_entry(self.workspace, image, indices, concepts, options, output.new)
        self._start(run, output, options)

    def _start(self, run: _Run, output: TextOutput, options: dict) -> None:
        self.output, self._run = output, run
        self._say(f"Searching {len(run.refs)} slice(s) of '{output.image.name}' for "
                  f"{', '.join(run.concepts) or 'the exemplars'}...")
        self.runner.start(iter_search, self.workspace, run.refs, run.concepts, **options,
                       warn_long=False, total=len(run.refs),
                       on_done=lambda _job: self._on_finished())
        self.refresh()

    def cancel(self) -> None:
        """Stop after the slice in progress; finished slices are kept."""
        if self.running:
            self.runner.cancel()
            self._say("Cancelling: the slice in progress finishes first.")

    def _apply_slices(self, steps: list[SearchStep]) -> None:
        """Write a batch of finished slices (:class:`~.generator_run.GeneratorRun`).

        The layer is redrawn once per batch, and only when a written slice is on screen.
        """
        out = self.output
        if out is None:
            return
        for done in steps:
            if done.min_score is not None and self.floor.cut != done.min_score:
                self.floor.set_cut(done.min_score)
            if not out.add(done.index, done.result, refresh=False):
                self.runner.cancel()
                self._say(f"'{out.layer.name}' was removed; the search stopped.", warn=True)
                return
        out.refresh(redraw=plane_shown(self.viewer, out.image, [d.index for d in steps]),
                    final=False)
        done = steps[-1]
        if not self.runner.news_due():
            return
        self.runner.set_progress(done.done)
        self.status.setText(f"{layers.index_label(out.image, done.index)}: "
                            f"{len(done.result.instances)} instance(s); "
                            f"{done.done} of {done.total} slice(s) done.")

    def _on_finished(self) -> None:
        out, run = self.output, self._run
        if out is None:
            return
        entry = self._entry and {**self._entry, "planes": self._entry["planes"][:out.planes]}
        written = out.finish(entry)
        self._run_layer = out.layer if out.new else self._run_layer
        hint = "" if written or not run.refs else contrast_hint(run.refs[0])
        self._say(summary(out, written, len(run.refs), run.concepts, run.floor) + hint)
        self.output = None
        self.refresh()

    def _say(self, message: str, warn: bool = False) -> None:
        """The dock's status line; ``warn``: also a pop-up (something stopped the user)."""
        self.messages = [*self.messages[-49:], message]
        (self.host.notify if warn else self.host.inform)(message)
