"""The dock's "Series" section: open a folder of images, step through it, see what is done.

"Open folder..." (or "Open file..." for a multi-series TIFF) asks for the images and, with
"Save labels: into a folder...", for the output folder; the labels format is chosen beside it.
The section shows "image 12 of 40", Previous / Next (``PageUp`` / ``PageDown`` on the viewer,
keys napari binds to nothing) and the list of images with a check mark on those done; clicking
one goes there. Moving on saves the current labels (see :mod:`.navigator`).
"""

from __future__ import annotations

from pathlib import Path

from qtpy.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from napari_sam3_onnx._napari.compact import compact_combo
from napari_sam3_onnx._napari.host import DockHost
from napari_sam3_onnx._napari.series.navigator import SeriesNavigator
from napari_sam3_onnx.api.labels_files import FORMATS
from napari_sam3_onnx.api.series_state import STATE_NAME

#: Viewer keys: previous and next image (napari binds neither).
KEYS = {"PageUp": "previous", "PageDown": "next"}
BESIDE = "beside each image"
FOLDER = "into a folder..."
DONE_MARK = "\u2713 "


class SeriesPanel(QGroupBox):
    """The series section of the dock (see the module notes).

    Parameters
    ----------
    host : DockHost
        The dock.
    """

    def __init__(self, host: DockHost, parent: QWidget | None = None) -> None:
        super().__init__("Series", parent)
        self.host = host
        self.navigator = SeriesNavigator(host, self._confirm, self.refresh)
        self.open_button = QPushButton("Open folder...")
        self.open_button.setToolTip("Annotate the images of a folder one by one (TIFF, .npy, "
                                    "zarr / OME-Zarr); reopening resumes where you stopped.")
        self.open_button.clicked.connect(lambda _c=False: self._ask_open(folder=True))
        self.open_file = QPushButton("Open file...")
        self.open_file.setToolTip("A multi-series TIFF: its full-size series one by one.")
        self.open_file.clicked.connect(lambda _c=False: self._ask_open(folder=False))
        self.where = compact_combo()
        self.where.addItems([BESIDE, FOLDER])
        self.format = compact_combo()
        self.format.addItems(list(FORMATS))
        self.position = QLabel("No series open.")
        self.previous = QPushButton("Previous [PgUp]")
        self.previous.clicked.connect(lambda _c=False: self.navigator.previous())
        self.next = QPushButton("Next [PgDn]")
        self.next.clicked.connect(lambda _c=False: self.navigator.next())
        self.save = QPushButton("Save")
        self.save.setToolTip("Save this image's labels now (moving on saves them too; PgDn on "
                             "the last image saves it).")
        self.save.clicked.connect(lambda _c=False: self.navigator.save_current())
        self.items = QListWidget()
        self.items.setMaximumHeight(110)
        self.items.itemClicked.connect(lambda it: self.navigator.go(self.items.row(it)))

        opens = QHBoxLayout()
        opens.addWidget(self.open_button)
        opens.addWidget(self.open_file)
        saving = QHBoxLayout()
        saving.addWidget(QLabel("Save labels"))
        saving.addWidget(self.where, 1)
        saving.addWidget(QLabel("as"))
        saving.addWidget(self.format)
        steps = QHBoxLayout()
        steps.addWidget(self.previous)
        steps.addWidget(self.position, 1)
        steps.addWidget(self.save)
        steps.addWidget(self.next)
        layout = QVBoxLayout(self)
        layout.addLayout(opens)
        layout.addLayout(saving)
        layout.addLayout(steps)
        layout.addWidget(self.items)
        self._bind_keys()
        self.refresh()

    # ---- API -------------------------------------------------------------------------
    def open(self, source: Path | str, out: Path | str | None = None,
             labels_format: str | None = None):
        """Open a series (what the buttons do after their dialogs); the ImageSeries or None."""
        fmt = labels_format or self.format.currentText()
        series = self.navigator.open(source, out, fmt)
        if series is not None:  # the choices shown are the open series' own
            self.where.setCurrentText(BESIDE if out is None else FOLDER)
            self.format.setCurrentText(fmt)
            self.where.setToolTip(f"Labels and {STATE_NAME} go to {series.state.path.parent}")
        return series

    def release(self) -> None:
        """The dock goes: unbind the keys (the layers and saved files stay)."""
        for key in KEYS:
            try:
                self.host.viewer.bind_key(key, None)
            except (KeyError, RuntimeError, AttributeError):
                pass
        self.navigator.close()

    # ---- display ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Show the position and the done marks of the open series."""
        series = self.navigator.series
        self.items.setVisible(series is not None)
        if series is None:
            for button in (self.previous, self.next, self.save):
                button.setEnabled(False)
            self.position.setText("No series open.")
            return
        self.previous.setEnabled(series.position > 0)
        self.next.setEnabled(series.position < len(series) - 1)
        self.save.setEnabled(self.navigator.layer is not None)
        flags = series.done_flags()
        shown = "" if self.navigator.layer is not None else ", not shown"
        self.position.setText(f"image {series.position + 1} of {len(series)}: "
                              f"{series.items[series.position].name} "
                              f"({sum(flags)} done{shown})")
        self.items.clear()
        for item, done in zip(series.items, flags, strict=True):
            self.items.addItem((DONE_MARK if done else "   ") + item.name)
        self.items.setCurrentRow(series.position)

    # ---- wiring ----------------------------------------------------------------------
    def _bind_keys(self) -> None:
        for key, name in KEYS.items():
            self.host.viewer.bind_key(key, getattr(self.navigator, name), overwrite=True)

    def _ask_open(self, folder: bool) -> None:
        if folder:
            source = QFileDialog.getExistingDirectory(self, "Open a folder of images")
        else:
            source, _ = QFileDialog.getOpenFileName(self, "Open a multi-series file", "",
                                                    "TIFF (*.tif *.tiff)")
        if not source:
            return
        out = None
        if self.where.currentText() == FOLDER:
            out = QFileDialog.getExistingDirectory(self, "Save the labels into this folder")
            if not out:
                return
        self.open(source, out)

    def _confirm(self, path: Path) -> bool:
        answer = QMessageBox.question(
            self, "Series", f"{path} already exists and was not saved by this series. "
            "Replace it with these labels?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes
