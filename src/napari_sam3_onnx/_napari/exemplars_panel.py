"""The "Like these" tab: labels a user already has become SAM 3 exemplars; find more like them.

The chosen Labels layer's ids (typed, or every id on the current plane) are positive exemplar
boxes on the planes they lie on, the other ids there optionally negative ones
(:func:`~napari_sam3_onnx.api.exemplars.exemplars_from_labels`). The run is the API's
:func:`~napari_sam3_onnx.api.exemplars.search_from_labels` over the dock's workspace, in a
worker: exemplar search on each exemplar's own plane, and with "Through the stack" the
instances carried through z by the memory tracker and linked across exemplar planes. The result
goes into its own Labels layer ("SAM like these"), never into the exemplars' layer.
"""

from __future__ import annotations

from functools import partial
from typing import cast

import numpy as np
from napari.layers import Labels
from qtpy.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from napari_sam3_onnx._napari import layers, workers
from napari_sam3_onnx._napari.compact import compact_combo
from napari_sam3_onnx._napari.host import DockHost, follow_dock
from napari_sam3_onnx._napari.qt_widgets import wrapped_label
from napari_sam3_onnx.api.exemplars import ExemplarSearch, exemplars_from_labels, search_from_labels
from napari_sam3_onnx.api.propagation_seeds import parse_ids
from napari_sam3_onnx.engine.concepts.search import parse_concepts
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import Sam3OnnxError

#: The result layer's name.
RESULT_NAME = "SAM like these"


class ExemplarPanel(QWidget):
    """The "Like these" tab (module docstring)."""

    def __init__(self, host: DockHost, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host, self.viewer = host, host.viewer
        self.workspace = host.model.workspace
        self.running = False
        self._cancel = False
        self.last: ExemplarSearch | None = None
        self._message = ""  # the last run's summary, shown while nothing is wrong
        self.source = compact_combo()
        self.by_ids = QRadioButton("These ids:")
        self.by_ids.setChecked(True)
        self.ids = QLineEdit()
        self.ids.setPlaceholderText("ids: 3, 7")
        self.by_plane = QRadioButton("Every id on this plane")
        self.others = QCheckBox("Other ids on those planes are negative exemplars")
        self.through = QCheckBox("Through the stack (carry what is found through z)")
        self.concepts = QLineEdit()
        self.concepts.setPlaceholderText("optional text, e.g. nucleus")
        self.run_button = QPushButton("Find more like these")
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.note = wrapped_label("")
        ids = QHBoxLayout()
        ids.addWidget(self.by_ids)
        ids.addWidget(self.ids)
        form = QFormLayout()
        form.addRow("Exemplars in", self.source)
        form.addRow(ids)
        form.addRow(self.by_plane)
        form.addRow(self.others)
        form.addRow("With text", self.concepts)
        form.addRow(self.through)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addWidget(wrapped_label(
            "Labels you have (Cellpose, StarDist, committed objects) as SAM 3 exemplars: each is "
            "searched for on its own plane; no exemplar is carried to another plane."))
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.note)
        layout.addStretch(1)
        follow_dock(self, host, self.refresh, lambda _e=None: self.refresh(), self.cancel)
        self.refresh()

    # ---- state -----------------------------------------------------------------------
    def problem(self) -> str:
        """Why a run cannot start ('' if it can)."""
        adapter, image = self.workspace.adapter, self.host.session.image
        if adapter is None or self.workspace.encoder is None:
            return "Load a model above."
        if not adapter.has(Capability.EXEMPLARS):
            return "This bundle has no exemplar search (SAM 3's detector with exemplar boxes)."
        if image is None:
            return "Choose an image in 'Clicks & boxes'."
        if len(layers.plane_shape(image)) > 3:
            return "Exemplars from labels work on 2-D images and 3-D stacks (not 4-D) for now."
        if self.source.currentData() is None:
            return "Add a Labels layer with the image's shape: its labels are the exemplars."
        return ""

    def refresh(self) -> None:
        """Update the layer choices and which controls work."""
        image = self.host.session.image
        shape = None if image is None else layers.plane_shape(image)
        current = self.source.currentData()
        found = [la for la in self.viewer.layers if isinstance(la, Labels) and shape is not None
                 and tuple(la.data.shape) == shape and not layers.is_scratch(la)
                 and la.name != RESULT_NAME]
        self.source.blockSignals(True)
        self.source.clear()
        for layer in found:
            self.source.addItem(layer.name, layer)
        if current in found:
            self.source.setCurrentIndex(found.index(current))
        elif found:  # the topmost: the layer most recently added, as a rule
            self.source.setCurrentIndex(len(found) - 1)
        self.source.blockSignals(False)
        stack = shape is not None and len(shape) == 3
        clicks = self.workspace.has(Capability.CLICKS)
        self.through.setEnabled(stack and clicks)
        if not (stack and clicks):
            self.through.setChecked(False)
        problem = self.problem()
        if not self.running:
            self.note.setText(problem or self._message)
        self.run_button.setEnabled(not problem and not self.running)
        self.cancel_button.setEnabled(self.running)

    # ---- actions ---------------------------------------------------------------------
    def run(self) -> bool:
        """Start the search; returns whether it started."""
        try:
            job = self._job()
        except Sam3OnnxError as exc:
            self.host.notify(str(exc))
            return False
        refs, exemplars, concepts, notes = job
        self.running, self._cancel, self._message = True, False, ""
        self.note.setText("Searching " + ", ".join(f"plane {k}" for k in sorted(exemplars))
                          + (" and carrying through z..." if self.through.isChecked() else "..."))
        work = partial(search_from_labels, through_stack=self.through.isChecked(),
                       cancelled=lambda: self._cancel)
        workers.start(work, self.workspace, refs, exemplars, concepts,
                      on_result=lambda res: self._done(cast(ExemplarSearch, res), notes),
                      on_error=self._failed)
        self.refresh()
        return True

    def cancel(self) -> None:
        """Stop between planes (what is done is kept)."""
        self._cancel = True

    def _job(self) -> tuple[list, dict, list[str], list[str]]:
        problem = self.problem()
        if problem or self.running:
            raise Sam3OnnxError(problem or "A search is already running.")
        image, source = self.host.session.image, self.source.currentData()
        index = layers.current_index(self.viewer, image)
        data = np.asarray(source.data)
        stack = data if data.ndim == 3 else data[None]
        if self.by_plane.isChecked():
            plane = stack[index[0] if index else 0]
            positive: list[int] | None = [int(i) for i in np.unique(plane) if i > 0]
            if not positive:
                raise Sam3OnnxError(f"'{source.name}' has no label on this plane.")
            stack = np.where(np.arange(len(stack))[:, None, None] == (index[0] if index else 0),
                             stack, 0)
        else:
            positive = parse_ids(self.ids.text())
        adapter = self.workspace.adapter
        slots = None if adapter is None else adapter.concept_detector.max_exemplars
        exemplars, notes = exemplars_from_labels(stack, positive,
                                                 others_negative=self.others.isChecked(),
                                                 max_per_plane=slots or None)
        version = self.host.session.data_version(image)
        refs = layers.refs_along(image, 0, (), version) if data.ndim == 3 \
            else [layers.slice_ref(image, (), version)]
        text = self.concepts.text().strip()
        return refs, exemplars, parse_concepts(text) if text else [], notes

    def _done(self, res: ExemplarSearch, notes: list[str]) -> None:
        self.running, self.last = False, res
        image = self.host.session.image
        if image is not None and image in self.viewer.layers:
            out = layers.find_or_add(self.viewer, Labels, RESULT_NAME, image)
            out.data = res.labels if out.data.ndim == 3 else res.labels[0]
        how = f", carried through z ({res.method})" if res.method else ""
        planes = ", ".join(map(str, res.planes))
        message = (f"{res.objects} object(s) like the exemplars (searched on plane(s) {planes}"
                   f"{how}) -> '{RESULT_NAME}'." + ("" if not notes else " " + " ".join(notes))
                   + (" Cancelled: the planes finished are kept." if res.cancelled else ""))
        self._message = message
        self.host.inform(message)
        self.refresh()

    def _failed(self, exc: BaseException) -> None:
        self.running = False
        self.host.notify(workers.describe(exc))
        self.refresh()
