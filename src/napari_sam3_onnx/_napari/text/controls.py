"""Two compound controls of the Text tab: the score floor and the scope (which slices)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from qtpy.QtCore import Qt
from qtpy.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QSlider, QSpinBox, QWidget

from napari_sam3_onnx._napari.layers import LEAD_AXIS_NAMES
from napari_sam3_onnx._napari.qt_widgets import wrapped_label
from napari_sam3_onnx._napari.text.inputs import scope_indices

DEFAULT_FLOOR = 0.5
SCOPE_TITLES = {"current": "Current slice", "all": "All slices", "range": "Slice range"}


class FloorControl(QWidget):
    """Confidence floor in [0, 0.99] (steps of 0.01): keep instances scoring above it.

    Where the bundle's graph cuts at its own threshold (wkentaro's exports: 0.5), the slider
    cannot go below that cut and a note says why.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 99)
        self.slider.setValue(round(DEFAULT_FLOOR * 100))
        self.shown = QLabel()
        self.note = wrapped_label()
        self.slider.valueChanged.connect(lambda _v: self._show())
        self.cut: float | None = None
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.slider, 1)
        row.addWidget(self.shown)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addLayout(row, 0, 0)
        grid.addWidget(self.note, 1, 0)
        self.set_cut(None)

    @property
    def value(self) -> float:
        """The floor: instances must score above it."""
        return self.slider.value() / 100.0

    def set_value(self, floor: float) -> None:
        """Move the slider (clamped to what the bundle allows)."""
        self.slider.setValue(round(float(floor) * 100))

    def set_cut(self, cut: float | None) -> None:
        """The score cut inside the bundle's graph (0: raw heads; None: not known yet)."""
        self.cut = cut
        self.slider.setMinimum(math.ceil(round(cut * 100, 6)) if cut else 0)
        if cut:
            self.note.setText(
                f"This export cuts at {cut:g} inside the graph: lower scores never leave it, "
                f"so the floor cannot go below {cut:g}. Raw-head exports (samexporter) allow "
                "lower floors.")
        elif cut is None:
            self.note.setText("Keeps instances scoring above the floor (SAM 3 uses 0.5).")
        else:
            self.note.setText("Raw detector heads: any floor works (SAM 3 uses 0.5); lower "
                              "floors find more, including weaker guesses.")
        self._show()

    def _show(self) -> None:
        self.shown.setText(f"{self.value:.2f}")


class ScopeControl(QWidget):
    """Current slice / all slices / a range, along a leading axis of the image."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = QComboBox()
        for key, title in SCOPE_TITLES.items():
            self.mode.addItem(title, key)
        self.axis = QComboBox()
        self.lo = QSpinBox()
        self.lo.setPrefix("from ")
        self.hi = QSpinBox()
        self.hi.setPrefix("to ")
        self.axis_label = QLabel("along")
        self.mode.currentIndexChanged.connect(lambda _i: self._show())
        self.axis.currentIndexChanged.connect(lambda _i: self._axis_changed())
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        for w in (self.mode, self.axis_label, self.axis, self.lo, self.hi):
            row.addWidget(w)
        row.addStretch(1)
        self.lead: tuple[int, ...] = ()
        self.set_shape(())

    def set_shape(self, lead_shape: Sequence[int]) -> None:
        """The sizes of the image's leading axes (``()`` for a 2-D image: current only)."""
        lead = tuple(int(n) for n in lead_shape)
        if lead == self.lead and self.axis.count():
            return
        self.lead = lead
        names = LEAD_AXIS_NAMES.get(len(lead), tuple(f"axis {i}" for i in range(len(lead))))
        self.axis.blockSignals(True)
        self.axis.clear()
        for i, (name, n) in enumerate(zip(names, lead, strict=True)):
            self.axis.addItem(f"{name} (axis {i}, {n})", i)
        self.axis.blockSignals(False)
        if not lead:
            self.mode.setCurrentIndex(0)
        self._axis_changed()

    def _axis_changed(self) -> None:
        n = self.lead[self.axis_index] if self.lead else 1
        for box in (self.lo, self.hi):
            box.setRange(0, max(n - 1, 0))
        self.hi.setValue(max(n - 1, 0))
        self._show()

    def _show(self) -> None:
        stack = bool(self.lead)
        self.mode.setEnabled(stack)
        many = stack and self.mode.currentData() != "current"
        self.axis.setVisible(many and len(self.lead) > 1)
        self.axis_label.setVisible(many and len(self.lead) > 1)
        for box in (self.lo, self.hi):
            box.setVisible(many and self.mode.currentData() == "range")

    @property
    def axis_index(self) -> int:
        """The leading axis runs go along (0 unless the user picked another for 4-D data)."""
        data = self.axis.currentData()
        return 0 if data is None else int(data)

    def set_mode(self, mode: str, lo: int | None = None, hi: int | None = None) -> None:
        """Choose ``"current"``, ``"all"`` or ``"range"`` (with its bounds) programmatically."""
        self.mode.setCurrentIndex(list(SCOPE_TITLES).index(mode))
        if lo is not None:
            self.lo.setValue(lo)
        if hi is not None:
            self.hi.setValue(hi)

    def indices(self, current: Sequence[int]) -> list[tuple[int, ...]]:
        """The planes a run covers, given the plane the viewer shows."""
        return scope_indices(self.lead, current, self.mode.currentData(), self.axis_index,
                             self.lo.value(), self.hi.value())
