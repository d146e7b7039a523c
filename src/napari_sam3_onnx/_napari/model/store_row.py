"""The model section's embedding-store row: memory only, or a zarr store on disk.

Every tab gets its embeddings through the one encoder the model section hands the session;
with a store attached that encoder reads (and, when allowed, adds to) the store, so a stack
``napari-sam3-onnx precompute`` filled is prompted, searched and propagated without encoding
(:mod:`napari_sam3_onnx.engine.store.lookup` finds its entries by content).
"""

from __future__ import annotations

from pathlib import Path

from qtpy.QtCore import Signal
from qtpy.QtWidgets import QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QWidget

MEMORY_ONLY = "Memory only"
CHOOSE = "Zarr store on disk..."
WRITE_TEXT = "Add new embeddings to the store"


class StoreRow(QWidget):
    """Choose where embeddings are kept besides memory; emits ``changed`` on every choice.

    Attributes
    ----------
    path : Path or None
        The attached store folder (None: memory only).
    write : QCheckBox
        Whether new embeddings are added to the store.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path: Path | None = None
        self.choice = QComboBox()
        self.choice.addItems([MEMORY_ONLY, CHOOSE])
        self.choice.setToolTip("Where embeddings are read from besides memory: a store that "
                               "'napari-sam3-onnx precompute --store' filled (on a cluster, "
                               "overnight) is read instead of encoding.")
        self.choice.activated.connect(self._chosen)
        self.write = QCheckBox(WRITE_TEXT)
        self.write.setToolTip("Write planes encoded here into the store too (entries of other "
                              "data are never replaced). Off: the store is only read.")
        self.write.toggled.connect(lambda _on: self.path is not None and self.changed.emit())
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.choice, 1)
        row.addWidget(self.write)

    def attach(self, path: str | Path | None, write: bool | None = None) -> None:
        """Use the store at ``path`` (None: memory only); ``write`` sets the checkbox."""
        if write is not None:
            self.write.blockSignals(True)
            self.write.setChecked(bool(write))
            self.write.blockSignals(False)
        self.path = None if path is None else Path(path).expanduser()
        self._show()
        self.changed.emit()

    def show_attached(self, path: str | Path, write: bool) -> None:
        """Show the store at ``path`` as attached already (no ``changed``: nothing to check)."""
        self.write.blockSignals(True)
        self.write.setChecked(bool(write))
        self.write.blockSignals(False)
        self.path = Path(path).expanduser()
        self._show()

    def detach(self) -> None:
        """Back to memory only, without a ``changed`` signal (the caller rebuilds)."""
        self.path = None
        self._show()

    def _show(self) -> None:
        while self.choice.count() > 2:
            self.choice.removeItem(2)
        if self.path is None:
            self.choice.setCurrentIndex(0)
            return
        self.choice.addItem(self.path.name)
        self.choice.setItemData(2, str(self.path.resolve()), 3)  # Qt.ToolTipRole
        self.choice.setCurrentIndex(2)

    def _chosen(self, row: int) -> None:
        if row == 0 and self.path is not None:
            self.attach(None)
        elif row == 1:
            folder = QFileDialog.getExistingDirectory(self, "Embedding store (a .zarr folder)")
            if folder:
                self.attach(folder)
            else:
                self._show()
