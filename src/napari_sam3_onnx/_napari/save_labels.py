""""Save labels...": the selected Labels layer to an OME-TIFF, a ``.npy`` or OME-Zarr labels.

The format follows the chosen name's ending, or the dialog's filter when the name has none
(:func:`target_for`); the file is written by the package's one labels writer
(:func:`napari_sam3_onnx.api.labels_files.write_labels`). OME-Zarr keeps the layer's scale,
translate, units and colours (an existing OME-Zarr *image* chosen as the target gets the labels
in its ``labels/<layer name>`` group, next to its arrays, which are never written); an OME-TIFF
(``.ome.tif``) keeps the Z, Y and X pixel sizes and units; a ``.npy`` keeps the array only.
An existing file of the chosen format (an OME-Zarr labels image) is replaced only after the
user confirms; any other existing folder or file is refused.

Every format records the prompts of the layer's committed objects (its commit log,
:mod:`~napari_sam3_onnx._napari.labels_record`): in the OME-Zarr attributes, the TIFF's OME
description, or the ``.npy``'s sidecar JSON, so ``napari-sam3-onnx replay`` can run them again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from napari.layers import Labels
from qtpy.QtWidgets import QFileDialog, QMessageBox, QPushButton, QWidget

from napari_sam3_onnx._napari.commit_log import held_before, live_entries
from napari_sam3_onnx._napari.labels_record import layer_record
from napari_sam3_onnx._napari.ome_zarr_reader import prefer_for
from napari_sam3_onnx.api.atomic import OutputTakenError
from napari_sam3_onnx.api.dock_replay import NOTHING
from napari_sam3_onnx.api.labels_files import format_of, write_labels
from napari_sam3_onnx.api.ngff import (
    NGFF_SUFFIX,
    UNITS,
    image_of_labels,
    is_ngff_image,
    is_ngff_labels,
    ngff_axes,
)
from napari_sam3_onnx.api.provenance import sidecar

BUTTON_TEXT = "Save labels..."
#: The ending of a TIFF the dock writes: what this plugin's TIFF reader is registered for
#: (a reader for every ``*.tif`` would make napari ask which reader to use for any TIFF).
OME_TIFF = ".ome.tif"
#: The dialog's filters, one per format (the first is the default).
FILTERS = {"OME-TIFF (*.ome.tif *.ome.tiff)": OME_TIFF, "NumPy array (*.npy)": ".npy",
           "OME-Zarr (*.ome.zarr)": NGFF_SUFFIX}


def _planes(data, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    for index in np.ndindex(*shape[:-2]):
        yield np.asarray(data[index])


def _units(layer: Labels) -> list[str | None]:
    units = getattr(layer, "units", None) or [None] * layer.ndim
    return [str(u) if str(u) in UNITS else None for u in units]


def _axes(layer: Labels) -> str:
    """The layer's axis letters where they are NGFF/OME ones in a valid order, else defaults."""
    labels = "".join(str(a).lower() for a in getattr(layer, "axis_labels", ()))
    return "".join(a["name"] for a in ngff_axes(layer.ndim, labels)).upper()


def _colour(layer: Labels) -> Callable[[int], tuple[int, ...]]:
    def colour(label: int) -> tuple[int, ...]:
        rgba = np.asarray(layer.colormap.map(label), float).ravel()[:4]
        return tuple(round(float(v) * 255) for v in rgba)

    return colour


def save_labels(layer: Labels, path: Path, replace: bool = False) -> Path:
    """Write ``layer`` (full resolution, plane by plane) to ``path`` in its format.

    Parameters
    ----------
    layer : napari.layers.Labels
        2-D to 5-D labels, written as int32; a multiscale layer's level 0 is written.
    path : Path
        ``.tif``/``.tiff``, ``.npy``, ``name.ome.zarr`` or ``IMAGE/labels/NAME`` (see
        :func:`target_for`).
    replace : bool
        An existing ``path`` may be replaced (the user confirmed); otherwise the labels take
        the name only if it is still free when written.
    """
    data = layer.data[0] if layer.multiscale else layer.data
    shape = tuple(int(s) for s in data.shape)
    return write_labels(path, shape, _planes(data, shape), axes=_axes(layer), replace=replace,
                        provenance=layer_record(layer), scale=tuple(layer.scale),
                        translation=tuple(layer.translate), units=_units(layer),
                        colours=_colour(layer))


def target_for(path: Path, layer_name: str, chosen_filter: str = "") -> Path:
    """Where the labels go for the chosen ``path`` (and the dialog's filter).

    An OME-Zarr image gets them in ``labels/<layer name>``; an ``IMAGE/labels/NAME`` path or a
    name ending in a format's suffix stays as it is (``.zarr`` becomes ``.ome.zarr``); any other
    name gets the ending of ``chosen_filter`` (default OME-Zarr). A ``.tif``/``.tiff`` name
    becomes ``.ome.tif``/``.ome.tiff``, the name this plugin reopens as Labels with its scale.
    """
    path = Path(path)
    if is_ngff_image(path):
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", layer_name).strip("._") or "labels"
        return path / "labels" / name
    if image_of_labels(path) is not None:
        return path
    lower = path.name.lower()
    if lower.endswith((".tif", ".tiff")) and ".ome." not in lower:
        return path.with_name(path.name[: path.name.rfind(".")] + ".ome" + path.suffix)
    try:
        format_of(path)
        return path
    except ValueError:
        pass
    stem = path.name.removesuffix(".zarr") if path.name.lower().endswith(".zarr") else None
    if stem is not None:
        return path.with_name(stem + NGFF_SUFFIX)
    return path.with_name(path.name + FILTERS.get(chosen_filter, NGFF_SUFFIX))


def refusal(path: Path) -> str | None:
    """Why ``path`` must not be written even with consent (None: it may be, maybe replacing)."""
    ngff = image_of_labels(path) is not None or path.name.lower().endswith(NGFF_SUFFIX)
    if path.name.lower().endswith(".npy") and not path.exists() and (
            sidecar(path).exists() or sidecar(path).is_symlink()):
        return (f"{sidecar(path)} exists without its labels file; it is not replaced "
                "(choose another name, or remove it yourself if it can go).")
    if not (path.exists() or path.is_symlink()):
        folder = path.parent.parent if image_of_labels(path) is not None else path.parent
        return None if folder.is_dir() else f"The folder {folder} does not exist."
    if (ngff and path.is_dir() and is_ngff_labels(path)) or (
            not ngff and path.is_file() and not path.is_symlink()):
        return None
    what = "an OME-Zarr labels image" if ngff else "a file"
    return (f"{path} exists and is not {what}; it is not replaced "
            "(choose another name, or remove it yourself if it can go).")


def _loss(layer: Labels, fmt: str) -> str:
    """What of the layer's geometry the format does not keep ('' if nothing)."""
    lost = []
    if not (np.allclose(layer.rotate, np.eye(layer.ndim)) and np.allclose(layer.shear, 0)):
        lost.append("rotation or shear")
    if fmt != "ome.zarr" and np.any(layer.translate):
        lost.append("translation")
    if fmt == "npy" and not np.allclose(layer.scale, 1):
        lost.append("scale")
    return "" if not lost else f" ({fmt} does not keep the layer's {' and '.join(lost)})"


def _replay_note(layer: Labels) -> str:
    """What the saved record allows ('' when its commits replay to the whole layer)."""
    if not live_entries(layer):
        return f". No replayable steps: {NOTHING}."
    held = held_before(layer)
    if held:
        return (f". The layer held {held} labelled pixel(s) before its first dock commit "
                "(painted or opened): a replay gives the commits alone.")
    return ""


class SaveLabelsButton(QPushButton):
    """The button that saves the selected Labels layer as OME-TIFF, ``.npy`` or OME-Zarr.

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
        self.setToolTip("Write the selected labels layer as an OME-TIFF, a .npy or an OME-Zarr "
                        "labels image (or into an OME-Zarr image's labels), with the prompts "
                        "of its committed objects for replay.")
        self.clicked.connect(lambda _checked=False: self.save())

    def save(self) -> Path | None:
        """Ask for a name, check it, confirm a replacement, write; the path written or None."""
        layer = self.viewer.layers.selection.active
        if not isinstance(layer, Labels):
            self.notify("Select a labels layer to save.")
            return None
        chosen, chosen_filter = QFileDialog.getSaveFileName(
            self, BUTTON_TEXT, f"{layer.name}{OME_TIFF}", ";;".join(FILTERS))
        if not chosen:
            return None
        path = target_for(Path(chosen), layer.name, chosen_filter)
        why = refusal(path)
        if why is not None:
            self.notify(why)
            return None
        exists = path.exists()
        if exists:
            also = f" (and {sidecar(path).name})" if path.name.lower().endswith(".npy") else ""
            answer = QMessageBox.question(
                self, BUTTON_TEXT, f"{path} already exists. Replace these labels{also}?",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No)
            if answer != QMessageBox.StandardButton.Yes:
                return None
        fmt = "ome.zarr" if image_of_labels(path) is not None else format_of(path)
        try:
            save_labels(layer, path, replace=exists)
        except OutputTakenError as taken:  # someone took the name meanwhile: both kept
            self.notify(str(taken))
            return None
        if fmt != "npy" and image_of_labels(path) is None:  # reopen with this plugin's reader
            prefer_for(path)
        self.notify(f"Saved '{layer.name}' as {fmt} labels: {path}{_loss(layer, fmt)}"
                    f"{_replay_note(layer)}")
        return path
