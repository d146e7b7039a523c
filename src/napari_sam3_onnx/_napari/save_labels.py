""""Save labels as OME-Zarr...": the selected Labels layer to an NGFF labels image.

The layer's scale, translate and units become the NGFF coordinate transformations and axis
units, its colours the ``image-label`` colours. A name ending in ``.ome.zarr`` is a labels image
of its own; an existing OME-Zarr *image* chosen as the target gets the labels in its
``labels/<layer name>`` group, next to its arrays, which are never written. An existing labels
image is replaced only after the user confirms; any other existing folder or file is refused.

The prompts of the layer's committed objects (its commit log) are recorded in the labels
group's attributes (:mod:`~napari_sam3_onnx._napari.labels_record`), so ``napari-sam3-onnx
replay`` can run them again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from napari.layers import Labels
from qtpy.QtWidgets import QFileDialog, QMessageBox, QPushButton, QWidget

from napari_sam3_onnx._napari.labels_record import layer_record
from napari_sam3_onnx._napari.ome_zarr_reader import prefer_for
from napari_sam3_onnx.api.ngff import (
    NGFF_SUFFIX,
    UNITS,
    image_of_labels,
    is_ngff_image,
    is_ngff_labels,
    write_ngff_labels,
)
from napari_sam3_onnx.api.provenance import ATTR

BUTTON_TEXT = "Save labels as OME-Zarr..."


def _planes(data, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    for index in np.ndindex(*shape[:-2]):
        yield np.asarray(data[index])


def _units(layer: Labels) -> list[str | None]:
    units = getattr(layer, "units", None) or [None] * layer.ndim
    return [str(u) if str(u) in UNITS else None for u in units]


def _axes(layer: Labels) -> str | None:
    labels = "".join(str(a).lower() for a in getattr(layer, "axis_labels", ()))
    return labels if len(labels) == layer.ndim else None


def _colour(layer: Labels) -> Callable[[int], tuple[int, ...]]:
    def colour(label: int) -> tuple[int, ...]:
        rgba = np.asarray(layer.colormap.map(label), float).ravel()[:4]
        return tuple(round(float(v) * 255) for v in rgba)

    return colour


def save_labels(layer: Labels, path: Path) -> Path:
    """Write ``layer`` (full resolution, plane by plane) as NGFF labels at ``path``.

    Parameters
    ----------
    layer : napari.layers.Labels
        2-D to 5-D labels; a multiscale layer's level 0 is written.
    path : Path
        ``name.ome.zarr`` or ``IMAGE/labels/NAME`` (see :func:`target_for`); replaced if it
        exists (the caller has asked).
    """
    data = layer.data[0] if layer.multiscale else layer.data
    shape = tuple(int(s) for s in data.shape)
    record = layer_record(layer)
    return write_ngff_labels(path, shape, _planes(data, shape), scale=tuple(layer.scale),
                             translation=tuple(layer.translate), units=_units(layer),
                             axes=_axes(layer), colours=_colour(layer),
                             attributes=None if record is None else {ATTR: record.to_dict()})


def target_for(path: Path, layer_name: str) -> Path:
    """Where the labels go for the chosen ``path``.

    An OME-Zarr image gets them in ``labels/<layer name>``; an ``IMAGE/labels/NAME`` path stays
    as it is; any other name gets the ``.ome.zarr`` ending if it lacks it.
    """
    path = Path(path)
    if is_ngff_image(path):
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", layer_name).strip("._") or "labels"
        return path / "labels" / name
    if image_of_labels(path) is not None or path.name.lower().endswith(NGFF_SUFFIX):
        return path
    return path.with_name(path.name.removesuffix(".zarr") + NGFF_SUFFIX)


def refusal(path: Path) -> str | None:
    """Why ``path`` must not be written even with consent (None: it may be, maybe replacing)."""
    if not (path.exists() or path.is_symlink()):
        folder = path.parent if image_of_labels(path) is None else path.parent.parent
        return None if folder.is_dir() else f"The folder {folder} does not exist."
    if path.is_dir() and is_ngff_labels(path):
        return None
    return (f"{path} exists and is not an OME-Zarr labels image; it is not replaced "
            "(choose another name, or remove it yourself if it can go).")


class SaveLabelsButton(QPushButton):
    """The button that saves the selected Labels layer as OME-Zarr.

    Parameters
    ----------
    viewer : napari.Viewer
        Its selected layer is saved.
    notify : callable
        ``notify(message)`` for the outcome and refusals.
    """

    def __init__(self, viewer, notify: Callable[[str], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(BUTTON_TEXT, parent)
        self.viewer, self.notify = viewer, notify
        self.setToolTip("Write the selected labels layer as an OME-Zarr (NGFF) labels image "
                        "with its scale and colours, or into an OME-Zarr image's labels.")
        self.clicked.connect(lambda _checked=False: self.save())

    def save(self) -> Path | None:
        """Ask for a name, check it, confirm a replacement, write; the path written or None."""
        layer = self.viewer.layers.selection.active
        if not isinstance(layer, Labels):
            self.notify("Select a labels layer to save as OME-Zarr.")
            return None
        chosen, _ = QFileDialog.getSaveFileName(
            self, BUTTON_TEXT, f"{layer.name}{NGFF_SUFFIX}", "OME-Zarr (*.ome.zarr)")
        if not chosen:
            return None
        path = target_for(Path(chosen), layer.name)
        why = refusal(path)
        if why is not None:
            self.notify(why)
            return None
        if path.exists():
            answer = QMessageBox.question(
                self, BUTTON_TEXT, f"{path} already exists. Replace these labels?",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No)
            if answer != QMessageBox.StandardButton.Yes:
                return None
        if not (np.allclose(layer.rotate, np.eye(layer.ndim))
                and np.allclose(layer.shear, 0)):
            self.notify("OME-Zarr records scale and translation only: the layer's rotation or "
                        "shear is not saved.")
        save_labels(layer, path)
        if path.name.lower().endswith(NGFF_SUFFIX):  # a labels image of its own: reopen as such
            prefer_for(path)
        self.notify(f"Saved '{layer.name}' as OME-Zarr labels: {path}")
        return path
