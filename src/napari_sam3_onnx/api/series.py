"""Image series: annotate the images of a folder (or of one multi-image file) one by one.

The one workflow behind the widget's series mode and the command line's ``--skip-done``:
:meth:`ImageSeries.open` lists the items (:mod:`.series_items`), checks where the labels go
before any work and reads the state file there (:mod:`.series_state`); it starts at the first
unfinished image. :meth:`ImageSeries.save` writes an image's labels (:mod:`.labels_files`)
and records them as done. Labels go beside each image (``NAME_labels.tif``) or into one output
folder (``OUT/NAME.tif``, the names ``segment-all`` gives with several images).

A file is never replaced unless the caller says the user confirmed (``overwrite=True``) -
except the labels file this series itself saved for that image, unchanged since (going back
to an image and correcting it replaces its own labels). An image is never an output.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .io import InputError, is_image_path
from .labels_files import FORMATS, read_plane_labels, write_plane_labels
from .ngff import is_ngff_labels
from .provenance import Provenance
from .series_items import BESIDE_SUFFIX, SeriesItem, list_items
from .series_state import STATE_NAME, SeriesState


class LabelsExistError(InputError):
    """The labels file of an image exists and was not saved by this series: ask the user."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} already exists and was not saved by this series; replace "
                         "it only if it can go (confirm, or overwrite=True).")
        self.path = Path(path)


def _inside(path: Path, other: Path) -> bool:
    real, real_other = Path(os.path.realpath(path)), Path(os.path.realpath(other))
    return real == real_other or real_other in real.parents


def check_output_folder(folder: Path, items: Sequence[SeriesItem],
                        protected: Sequence[Path] = (), create: bool = False) -> Path:
    """Check (and with ``create`` make) the folder labels and the state file go to.

    Raises
    ------
    InputError
        The folder is (inside) an image of the series or a protected path (a model bundle),
        is a file, cannot be created (no parent folder) or cannot be written.
    """
    folder = Path(folder)
    for item in items:
        if Path(item.path).is_dir() and _inside(folder, item.path):
            raise InputError(f"The output folder {folder} is inside the image {item.path}: "
                             "labels never go into an image's own files; choose another folder.")
    for other in protected:
        if _inside(folder, Path(other)):
            raise InputError(f"The output folder {folder} is inside {other} (the model "
                             "bundle): choose another folder.")
    if folder.exists() and not folder.is_dir():
        raise InputError(f"The output folder {folder} is a file.")
    if not folder.exists():
        if not create or not folder.parent.is_dir():
            raise InputError(f"The output folder {folder} does not exist.")
        folder.mkdir()
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"Cannot write into {folder} (permission denied).")
    return folder


@dataclass
class ImageSeries:
    """An ordered series of 2-D images and where their labels go.

    Attributes
    ----------
    items : list of SeriesItem
    state : SeriesState
        Done items; its ``labels_format`` is the format new labels files get.
    out : Path or None
        The output folder; None: labels beside each image (the state in the image folder).
    position : int
        The current item (0-based).
    """

    items: list[SeriesItem]
    state: SeriesState
    out: Path | None = None
    position: int = 0

    @classmethod
    def open(cls, source: Path | str, out: Path | str | None = None,
             labels_format: str = "tif", protected: Sequence[Path] = ()) -> ImageSeries:
        """List ``source``'s images, check the output folder, read its state, resume.

        Parameters
        ----------
        source : Path or str
            A folder of images, a multi-series TIFF or a multi-image OME-Zarr.
        out : Path or str, optional
            One folder for every labels file and the state (created if its parent exists);
            default: beside each image, the state in the image folder.
        labels_format : str
            ``"tif"``, ``"npy"`` or ``"ome.zarr"`` for labels files saved from now on.
        protected : sequence of Path
            Folders labels never go into (the model bundle).
        """
        if labels_format not in FORMATS:
            raise InputError(f"Labels format {labels_format!r}: use one of "
                             f"{', '.join(FORMATS)}.")
        source = Path(source)
        out_path = None if out is None else Path(out)
        items = list_items(source, skip=() if out_path is None else (out_path,))
        beside = source if source.is_dir() and not is_image_path(source) else source.parent
        folder = check_output_folder(beside if out_path is None else out_path, items,
                                     protected, create=out_path is not None)
        if out_path is not None and any(Path(os.path.realpath(i.path)).parent
                                        == Path(os.path.realpath(out_path)) for i in items):
            raise InputError(f"The output folder {out_path} holds the images: their labels "
                             "would be listed as images next time. Save the labels beside "
                             "each image (NAME_labels), or choose another folder.")
        where = "beside" if out_path is None else "folder"
        state = SeriesState.load(folder / STATE_NAME, labels_format, where)
        state.labels_format, state.where = labels_format, where
        series = cls(items, state, out_path)
        first = series.first_unfinished()
        series.position = 0 if first is None else first
        return series

    def __len__(self) -> int:
        return len(self.items)

    def is_done(self, index: int) -> bool:
        """Whether item ``index`` has its saved labels, unchanged."""
        return self.state.is_done(self.items[index].key)

    def done_flags(self) -> list[bool]:
        """:meth:`is_done` of every item, in order."""
        return [self.is_done(i) for i in range(len(self.items))]

    def first_unfinished(self) -> int | None:
        """The first item not done (None: all are)."""
        return next((i for i, done in enumerate(self.done_flags()) if not done), None)

    def target(self, index: int) -> Path:
        """Where item ``index``'s labels are (done) or will be saved."""
        item = self.items[index]
        if self.is_done(index):
            recorded = self.state.labels_path(item.key)
            if recorded is not None:
                return recorded
        suffix = FORMATS[self.state.labels_format]
        if self.out is None:
            stem = item.beside_stem()
            return stem.with_name(stem.name + BESIDE_SUFFIX + suffix)
        return self.out / f"{item.name}{suffix}"

    def needs_confirmation(self, index: int) -> bool:
        """Whether saving item ``index`` would replace a file this series did not save."""
        target = self.target(index)
        if not (target.exists() or target.is_symlink()):
            return False
        return not self.is_done(index)

    def read(self, index: int) -> np.ndarray:
        """Item ``index``'s image (:meth:`SeriesItem.read`)."""
        return self.items[index].read()

    def load_labels(self, index: int) -> np.ndarray | None:
        """The saved labels of a done item (int32 ``(rows, cols)``); None if not done."""
        if not self.is_done(index):
            return None
        path = self.state.labels_path(self.items[index].key)
        return None if path is None else read_plane_labels(path)

    def save(self, index: int, labels: np.ndarray, overwrite: bool = False,
             provenance: Provenance | None = None) -> Path:
        """Write item ``index``'s labels atomically and mark it done.

        Parameters
        ----------
        labels : numpy.ndarray
            ``(rows, cols)`` integer labels of the item's image.
        overwrite : bool
            The user confirmed replacing a file this series did not save.

        Raises
        ------
        LabelsExistError
            The target exists, was not saved by this series, and ``overwrite`` is False.
        InputError
            Empty labels, a shape other than the image's, or a target that is an image of the
            series or a folder other than OME-Zarr labels.
        """
        labels = np.asarray(labels)
        if not labels.any():
            raise InputError(f"{self.items[index].name}: no labels to save.")
        target = self._checked_target(index, labels.shape)
        if self.needs_confirmation(index) and not overwrite:
            raise LabelsExistError(target)
        exists = target.exists() or target.is_symlink()
        write_plane_labels(target, labels, replace=exists, provenance=provenance)
        self.state.mark_done(self.items[index].key, target)
        return target

    def _checked_target(self, index: int, shape: tuple[int, ...]) -> Path:
        item, target = self.items[index], self.target(index)
        image = item.read()
        if tuple(shape) != tuple(image.shape[:2]):
            raise InputError(f"{item.name}: labels of shape {tuple(shape)} for an image of "
                             f"{tuple(image.shape[:2])}.")
        for other in self.items:
            if _inside(target, other.path) or _inside(other.path, target):
                raise InputError(f"{target} is (or holds) the image {other.path}: an image "
                                 "is never replaced by labels.")
        if target.is_dir() and not (target.name.lower().endswith(".ome.zarr")
                                    and is_ngff_labels(target)):
            raise InputError(f"{target} is a folder that is not OME-Zarr labels; it is not "
                             "replaced (move it away, or choose another output folder).")
        return target
