"""A hint in the dock when the chosen image layer is a preview series of a multi-series TIFF.

napari's own TIFF reader opens series 0, which in many microscope and pyramid OME-TIFFs is a
small preview: segmenting it gives labels for the preview, not for the acquisition. The plugin
does not declare a TIFF reader (napari would then ask which reader to use for every TIFF), so
the dock looks at the layer the tabs work on instead. When that layer comes from a TIFF file
(``layer.source.path``) holding several series and its data has the shape of a series that is
not the full-resolution one (:func:`~napari_sam3_onnx.api.tiff_series.full_size_series`), the
hint says which series napari opened and which is full resolution, and offers to open that one
as a new Image layer (lazily when large) with the file's pixel size as scale. When several
series tie for full size, it lists them and opens only the one the user picks. The user's layer
is never changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
from napari.layers import Image
from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QComboBox, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from napari_sam3_onnx._napari.compact import compact_combo
from napari_sam3_onnx._napari.layers import same
from napari_sam3_onnx._napari.qt_widgets import wrapped_label

#: Series up to this size are read into memory; larger ones stay lazy (read plane by plane).
IN_MEMORY_BYTES = 256 * 2**20
PICK = "choose a series..."


@dataclass(frozen=True)
class SeriesReport:
    """What a TIFF file holds, as seen from one layer opened from it.

    ``shapes``/``axes``: each series' shape and tifffile axes; ``opened``: the series whose
    shape the layer's data has; ``full``: the full-size series (several when they tie).
    """

    path: Path
    shapes: tuple[tuple[int, ...], ...]
    axes: tuple[str, ...]
    opened: int
    full: tuple[int, ...]

    def describe(self, i: int) -> str:
        """``"series i (3x60x90 ZYX)"``."""
        return f"series {i} ({'x'.join(map(str, self.shapes[i]))} {self.axes[i]})"


def layer_path(layer) -> Path | None:
    """The TIFF file ``layer`` was opened from, or None (not a file, not a TIFF, missing)."""
    path = getattr(getattr(layer, "source", None), "path", None)
    if not path or not str(path).lower().endswith((".tif", ".tiff")):
        return None
    path = Path(path)
    return path if path.is_file() else None


def data_shape(layer) -> tuple[int, ...]:
    """The shape of ``layer``'s data (its first level when multiscale)."""
    data = layer.data[0] if getattr(layer, "multiscale", False) else layer.data
    return tuple(int(s) for s in data.shape)


def series_report(path: Path, shape: tuple[int, ...]) -> SeriesReport | None:
    """A report when data of ``shape`` is a series of ``path`` other than the full-size one.

    None when the file holds one series, cannot be read, or ``shape`` is that of a full-size
    series or of no series at all (then it cannot be told which series the layer is).
    """
    try:
        stat = path.stat()
        shapes, axes, full = _series(str(path), (stat.st_mtime_ns, stat.st_ctime_ns,
                                                 stat.st_ino, stat.st_size))
    except Exception:  # a hint only: an odd file must not break the dock
        return None
    opened = [i for i, s in enumerate(shapes) if s == shape]
    if len(shapes) < 2 or not opened or any(shapes[i] == shape for i in full):
        return None
    return SeriesReport(path, shapes, axes, opened[0], full)


@lru_cache(maxsize=32)
def _series(path: str, _version: tuple[int, ...]):
    """Each series' shape and axes, and the full-size ones (read once per file version).

    ``_version`` (mtime, ctime, inode, size) only keys this memo of a header read.
    """
    import tifffile

    from napari_sam3_onnx.api.tiff_series import full_size_series

    with tifffile.TiffFile(path) as tf:
        found = list(tf.series)
        shapes = tuple(tuple(int(n) for n in s.shape) for s in found)
        axes = tuple(str(s.axes) for s in found)
        full = tuple(full_size_series(found)) if len(found) > 1 else (0,)
    return shapes, axes, full


def message(layer_name: str, report: SeriesReport) -> str:
    """What the hint says about ``report`` for the layer named ``layer_name``."""
    said = (f"'{layer_name}' is {report.describe(report.opened)} of {report.path.name}, which "
            f"holds {len(report.shapes)} image series; the tabs work on the layer as it is. ")
    if len(report.full) == 1:
        return said + (f"The full-resolution one is {report.describe(report.full[0])}: open "
                       "it as a new layer to segment it.")
    return said + (f"Series {', '.join(map(str, report.full))} are all full-size "
                   f"({'; '.join(map(report.describe, report.full))}): pick one to open it "
                   "as a new layer.")


def open_series(viewer, report: SeriesReport, index: int):
    """Add series ``index`` of ``report.path`` as a new Image layer (lazy when large)."""
    from napari_sam3_onnx.api.io import read_image
    from napari_sam3_onnx.api.metadata import pixel_size

    data = read_image(report.path, series=index)
    if int(np.prod(data.shape)) * data.dtype.itemsize <= IN_MEMORY_BYTES:
        data = np.asarray(data)
    rgb = report.axes[index].upper().endswith("S") and data.shape[-1] in (3, 4)
    kwargs: dict = {"name": f"{report.path.stem} (series {index})", "rgb": rgb}
    size = pixel_size(report.path, series=index)
    if size is not None:
        kwargs["scale"] = (1.0,) * (data.ndim - 2 - int(rgb)) + tuple(size)
    return viewer.add_image(data, **kwargs)


class SeriesHint(QWidget):
    """The hint under the dock's image chooser; hidden while there is nothing to say.

    Parameters
    ----------
    viewer : napari.Viewer
        Where the full-resolution series is added.
    image : QComboBox
        The dock's image chooser (its items' data are the Image layers the tabs work on).
    """

    def __init__(self, viewer, image: QComboBox, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.viewer, self.image = viewer, image
        self.report: SeriesReport | None = None
        self.text = wrapped_label()
        self.choice = compact_combo()
        self.choice.currentIndexChanged.connect(lambda _i: self._enable())
        self.button = QPushButton("Open as a new layer")
        self.button.clicked.connect(self.open)
        row = QHBoxLayout()
        row.addWidget(self.choice)
        row.addWidget(self.button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        layout.addLayout(row)
        image.currentIndexChanged.connect(lambda _i: self.refresh())
        events = viewer.layers.events
        hooks = [events.inserted, events.removed]
        def later(_event=None) -> None:  # after the dock has updated its image chooser
            self.setVisible(False)
        QTimer.singleShot(0, self._refresh_later)

        for emitter in hooks:
            emitter.connect(later)
        self.destroyed.connect(partial(_disconnect, hooks, later))
        self.setVisible(False)
        QTimer.singleShot(0, self._refresh_later)  # the dock fills its chooser silently

    def refresh(self) -> None:
        """Look again at the dock's current image layer."""
        layer = self.image.currentData()
        path = None if layer is None or not isinstance(layer, Image) else layer_path(layer)
        self.report = None if path is None else series_report(path, data_shape(layer))
        self.setVisible(self.report is not None)
        if self.report is None:
            return
        self.text.setText(message(layer.name, self.report))
        self.choice.blockSignals(True)
        self.choice.clear()
        if len(self.report.full) > 1:
            self.choice.addItem(PICK, None)
        for i in self.report.full:
            self.choice.addItem(self.report.describe(i), i)
        self.choice.blockSignals(False)
        self.choice.setVisible(len(self.report.full) > 1)
        self.button.setText(f"Open series {self.report.full[0]} as a new layer"
                            if len(self.report.full) == 1 else "Open as a new layer")
        self._enable()

    def _refresh_later(self) -> None:
        try:
            self.refresh()
        except RuntimeError:  # the dock was closed meanwhile
            pass

    def open(self) -> None:
        """Open the chosen full-size series as a new layer and make it the dock's image."""
        index = self.choice.currentData()
        if self.report is None or index is None:
            return
        layer = open_series(self.viewer, self.report, int(index))
        for i in range(self.image.count()):
            if same(self.image.itemData(i), layer):
                self.image.setCurrentIndex(i)

    def _enable(self) -> None:
        self.button.setEnabled(self.choice.currentData() is not None)


def _disconnect(hooks, callback, _obj=None) -> None:
    for emitter in hooks:
        try:
            emitter.disconnect(callback)
        except (RuntimeError, ValueError):  # napari already half gone at exit
            pass
