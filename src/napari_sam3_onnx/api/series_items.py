"""The images of a series, in order: a folder of 2-D images, a multi-series TIFF, an OME-Zarr.

A folder gives each image :func:`~.io.expand_inputs` finds in it, and its PNG, JPEG and BMP
files (read with scikit-image), sorted by name, with a TIFF
holding several full-size series (stage positions, wells) or an OME-Zarr holding several images
(bioformats2raw's layout: one image group per child) counted as one item per image. Labels files
a series saved beside its images (``NAME_labels.tif`` next to ``NAME.tif``) are not items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .io import InputError, expand_inputs, image_names, is_image_path, read_image
from .ngff import is_ngff_image

#: What a labels file saved beside its image adds to the image's name.
BESIDE_SUFFIX = "_labels"
#: Endings of 2-D images read with scikit-image (a series only; the batch commands take
#: TIFF, ``.npy`` and zarr).
PLAIN_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
#: An image file's ending, stripped from its name.
_ENDING = re.compile(r"(\.ome)?\.(tiff?|npy|zarr|png|jpe?g|bmp)$", re.IGNORECASE)


def _stem(name: str) -> str:
    return _ENDING.sub("", name)


def _is_plain(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(PLAIN_SUFFIXES)


@dataclass(frozen=True)
class SeriesItem:
    """One image of a series.

    Attributes
    ----------
    path : Path
        The file read (a TIFF, ``.npy``, a zarr folder, or one image group of an OME-Zarr).
    series : int or None
        The series of a multi-series TIFF (None: the file's only or full-resolution one).
    name : str
        Unique within the series; the labels file's name in an output folder.
    """

    path: Path
    series: int | None
    name: str

    @property
    def key(self) -> str:
        """What the series state knows the item by: its resolved path (and series)."""
        text = str(Path(self.path).resolve())
        return text if self.series is None else f"{text}#series={self.series}"

    def read(self) -> np.ndarray:
        """The image as a numpy array: ``(rows, cols)`` or RGB ``(rows, cols, 3|4)``.

        Raises
        ------
        InputError
            Not readable, or not one 2-D (gray or RGB) image after dropping singleton axes.
        """
        if _is_plain(Path(self.path)):
            data = _read_plain(Path(self.path))
        else:
            data = np.asarray(read_image(self.path, self.series))
        while data.ndim > 2 and data.shape[0] == 1:
            data = data[0]
        rgb = data.ndim == 3 and data.shape[-1] in (3, 4)
        if data.ndim != 2 and not rgb:
            raise InputError(f"{self.path}: a series holds 2-D images; this one has shape "
                             f"{tuple(data.shape)}. Open a stack on its own.")
        return data

    def beside_stem(self) -> Path:
        """The image's path without its ending (and with its series): labels go beside it."""
        path = Path(self.path)
        base = _stem(path.name)
        if is_ngff_image(path) and path.parent.name.lower().endswith(".zarr"):
            container = path.parent
            return container.parent / f"{_stem(container.name)}_{path.name}"
        if self.series is not None:
            base = f"{base}_s{self.series}"
        return path.parent / base


def _read_plain(path: Path) -> np.ndarray:
    """A PNG, JPEG or BMP file as an array (scikit-image's reader)."""
    from skimage.io import imread

    try:
        return np.asarray(imread(path))
    except Exception as exc:
        raise InputError(f"Cannot read {path} as an image ({type(exc).__name__}: {exc}).") \
            from exc


def _folder_images(folder: Path, skip: tuple[Path, ...]) -> list[Path]:
    """The images of a folder: what the batch commands read, plus PNG/JPEG/BMP files."""
    plain = sorted(p for p in folder.iterdir() if _is_plain(p))
    try:
        found = expand_inputs([folder], skip=skip)
    except InputError:
        if not plain:
            raise
        found = []
    return sorted([*found, *plain])


def _names(paths: list[Path]) -> list[str]:
    """Unique names: :func:`~.io.image_names`, without a PNG/JPEG/BMP ending where unique."""
    names = image_names(paths)
    short = [_stem(n) if _is_plain(p) else n for p, n in zip(paths, names, strict=True)]
    return [s if short.count(s) == 1 else n for s, n in zip(short, names, strict=True)]


def _tiff_series(path: Path) -> list[int] | None:
    """The full-size series of a TIFF holding several (None: a TIFF of one image)."""
    if not path.name.lower().endswith((".tif", ".tiff")) or not path.is_file():
        return None
    import tifffile

    from .tiff_series import full_size_series

    try:
        with tifffile.TiffFile(path) as tf:
            found = list(tf.series)
            top = full_size_series(found) if len(found) > 1 else []
    except Exception as exc:
        raise InputError(f"Cannot read {path} as a TIFF ({type(exc).__name__}: {exc}).") from exc
    return top if len(top) > 1 else None


def _zarr_images(path: Path) -> list[Path] | None:
    """The image groups of an OME-Zarr holding several (None: not such a container)."""
    if not path.is_dir() or is_ngff_image(path):
        return None
    children = [p for p in path.iterdir() if p.is_dir() and is_ngff_image(p)]
    if not children:
        return None
    return sorted(children, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit()
                                           else 0, p.name))


def _expand(path: Path, name: str) -> list[SeriesItem]:
    series = _tiff_series(path)
    if series is not None:
        return [SeriesItem(path, s, f"{name}_s{s}") for s in series]
    images = _zarr_images(path)
    if images is not None:
        return [SeriesItem(p, None, f"{name}_{p.name}") for p in images]
    return [SeriesItem(path, None, name)]


def _is_beside_labels(path: Path, stems: set[str]) -> bool:
    """Whether ``path`` is ``STEM_labels.*`` beside an image called ``STEM.*``."""
    base = _stem(path.name)
    return base.endswith(BESIDE_SUFFIX) and base[: -len(BESIDE_SUFFIX)] in stems


def list_items(source: Path | str, skip: tuple[Path, ...] = ()) -> list[SeriesItem]:
    """The ordered items of a folder, a multi-series TIFF or a multi-image OME-Zarr.

    Parameters
    ----------
    source : Path or str
        A folder of images, or one file (or zarr folder) holding several images.
    skip : tuple of Path
        Paths never taken as items (an output folder inside the image folder).

    Raises
    ------
    InputError
        ``source`` does not exist or holds no image.
    """
    source = Path(source)
    if _is_plain(source):
        paths = [source]
    elif is_image_path(source) or source.is_file():
        paths = expand_inputs([source])
    elif source.is_dir():
        paths = _folder_images(source, skip)
    else:
        paths = expand_inputs([source])  # says what is wrong with it
    stems = {_stem(p.name) for p in paths}
    paths = [p for p in paths if not _is_beside_labels(p, stems)]
    if not paths:
        raise InputError(f"{source} holds no image (only labels files).")
    names = _names(paths)
    items = [item for p, n in zip(paths, names, strict=True) for item in _expand(p, n)]
    if not items:
        raise InputError(f"{source} holds no image.")
    return items
