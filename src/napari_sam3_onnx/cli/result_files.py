"""Result files for the command line (labels stacks, CSV tables)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..api.atomic import OutputTakenError, keep_new
from ..api.io import InputError
from ..api.ngff import is_ngff_output, write_ngff_labels
from ..api.provenance import ATTR, Provenance, sidecar
from .atomic import atomic_output, new_sibling, remove_ours, replace_into

LABEL_SUFFIXES = (".tif", ".tiff", ".npy", ".zarr")


def check_labels_path(path: Path) -> Path:
    """Refuse an output name whose format is unknown (the folder is checked by :mod:`.guard`).

    ``IMAGE/labels/NAME`` inside an OME-Zarr image is a name too (NGFF labels of that image).
    """
    if not (path.name.lower().endswith(LABEL_SUFFIXES) or is_ngff_output(path)):
        raise InputError(f"--out {path}: use a .tif, .npy, .zarr or .ome.zarr name for the "
                         "labels (or IMAGE.ome.zarr/labels/NAME to add them to an OME-Zarr "
                         "image).")
    return path


#: Side of the square TIFF tiles (a multiple of 16, as TIFF requires).
TIFF_TILE = 256
#: OME axes of a labels stack by its number of dimensions.
DEFAULT_AXES = {2: "YX", 3: "ZYX", 4: "TZYX"}


def _tiles(planes: Iterable[np.ndarray], shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    """Each plane cut into ``TIFF_TILE``-px tiles, row-major, as tifffile's ``tile=`` expects.

    tifffile takes the tiles of every plane in order from an iterator (edge tiles may be
    smaller; it pads them). Handing it whole planes with ``tile=`` fails on planes larger
    than one tile.
    """
    rows, cols = shape[-2:]
    n = 0
    for plane in planes:
        plane = np.asarray(plane, np.int32)
        if plane.shape != (rows, cols):
            raise ValueError(f"label plane {plane.shape} is not {(rows, cols)}")
        n += 1
        for r in range(0, rows, TIFF_TILE):
            for c in range(0, cols, TIFF_TILE):
                yield plane[r:r + TIFF_TILE, c:c + TIFF_TILE]
    expected = int(np.prod(shape[:-2], dtype=np.int64))
    if n != expected:
        raise ValueError(f"{n} label planes for a stack of {expected}")


def tiff_metadata(ndim: int, pixel_size: tuple[float, float] | None,
                  axes: str | None = None, description: str | None = None) -> dict:
    """Keywords for tifffile.imwrite: an OME-TIFF with ``axes`` and, if known, the pixel size.

    Parameters
    ----------
    ndim : int
        Dimensions of the labels array (2 to 4).
    pixel_size : (float, float) or None
        ``(row, col)`` pixel size in micrometres.
    axes : str, optional
        OME axis letters (default :data:`DEFAULT_AXES`).
    description : str, optional
        The OME image's ``Description`` (the provenance record, :mod:`..api.provenance`).
    """
    meta: dict = {"axes": axes or DEFAULT_AXES.get(ndim, "Q" * (ndim - 2) + "YX")}
    if description is not None:
        meta["Description"] = description
    kwargs: dict = {"ome": True, "photometric": "minisblack"}
    if pixel_size is not None:
        dy, dx = (float(v) for v in pixel_size)
        meta.update(PhysicalSizeY=dy, PhysicalSizeYUnit="\u00b5m",
                    PhysicalSizeX=dx, PhysicalSizeXUnit="\u00b5m")
        kwargs.update(resolution=(1e4 / dx, 1e4 / dy), resolutionunit="CENTIMETER")
    kwargs["metadata"] = meta
    return kwargs


def ngff_metadata(ndim: int, pixel_size: tuple[float, float] | None,
                  axes: str | None = None) -> dict:
    """Keywords for :func:`~..api.ngff.write_ngff_labels`: axes and, if known, the pixel size.

    Only rows and columns get a physical size (micrometres); other axes keep scale 1 and no
    unit, since the input's pixel size says nothing about them.
    """
    meta: dict = {"axes": axes}
    if pixel_size is not None:
        meta["scale"] = [1.0] * (ndim - 2) + [float(v) for v in pixel_size]
        meta["units"] = [None] * (ndim - 2) + ["micrometer"] * 2
    return meta


def write_labels(path: Path, shape: Sequence[int], planes: Iterable[np.ndarray],
                 pixel_size: tuple[float, float] | None = None, axes: str | None = None,
                 like: Path | None = None, replace: bool = True,
                 provenance: Provenance | None = None) -> Path:
    """Write int32 label planes (C order over the leading axes) to a new file, then rename.

    Parameters
    ----------
    path : Path
        ``.tif``/``.tiff`` (OME-TIFF, zlib-compressed 256-px tiles), ``.npy``, ``.zarr`` (a
        plain array), ``.ome.zarr`` or ``IMAGE/labels/NAME`` (NGFF labels, :mod:`..api.ngff`).
        Whether it may be replaced is decided before the work (:mod:`.guard`).
    shape : sequence of int
        ``(..., rows, cols)`` of the whole labels array.
    planes : iterable of numpy.ndarray
        ``(rows, cols)`` planes; only one is held at a time. They go to a temporary sibling
        that takes the name only when complete: an interrupted run leaves no half-written
        labels, and an old file of that name intact.
    pixel_size : (float, float), optional
        ``(row, col)`` micrometres per pixel, recorded in a TIFF or OME-Zarr.
    axes : str, optional
        OME axis letters of a TIFF, one per dimension (default :data:`DEFAULT_AXES`).
    like : Path, optional
        The OME-Zarr input image when the labels have its axes in its order: OME-Zarr labels
        then take its scale on every axis (see :func:`~..api.ngff.write_ngff_labels`).
    replace : bool
        ``--overwrite``: an existing ``path`` may be replaced. Without it the result takes the
        name only if it is still free when the work is done (else it is kept under a new name
        and :class:`~..api.atomic.OutputTakenError` says which).
    provenance : Provenance, optional
        What made the labels, written inside the output (a TIFF's OME description, the zarr
        attributes) or, for ``.npy``, to its sidecar, renamed right after the labels.
    """
    shape = tuple(int(s) for s in shape)
    record = None if provenance is None else provenance.to_dict()
    if is_ngff_output(path):
        return write_ngff_labels(path, shape, planes, like=like, replace=replace,
                                 attributes=None if record is None else {ATTR: record},
                                 **ngff_metadata(len(shape), pixel_size, axes))
    name = path.name.lower()
    side = None
    if provenance is not None and name.endswith(".npy"):
        side = new_sibling(sidecar(path))
    try:
        with atomic_output(path, directory=name.endswith(".zarr"), replace=replace) as tmp:
            _write(tmp, name, shape, planes, pixel_size, axes, provenance)
            if side is not None and provenance is not None:
                side.write_text(provenance.to_json(), encoding="utf-8")
        if side is not None:
            _place_sidecar(side, sidecar(path), replace)
            side = None
    finally:
        if side is not None:
            remove_ours(side)
    return path


def _place_sidecar(side: Path, target: Path, replace: bool) -> None:
    """Move the finished sidecar into place under the output's replace rule."""
    if replace:
        replace_into(side, target)
        return
    kept = keep_new(side, target)
    if kept != target:
        raise OutputTakenError(target, kept)


def _write(tmp: Path, name: str, shape: tuple[int, ...], planes: Iterable[np.ndarray],
           pixel_size: tuple[float, float] | None, axes: str | None,
           provenance: Provenance | None = None) -> None:
    lead = list(np.ndindex(*shape[:-2]))
    if name.endswith((".tif", ".tiff")):
        import tifffile

        text = None if provenance is None else provenance.to_json()
        meta = tiff_metadata(len(shape), pixel_size, axes, text)
        if 1 in shape[:-2]:  # OME readers drop length-1 axes: 1 x Y x X would read as Y x X;
            meta["ome"] = False  # tifffile's shaped description keeps the shape and the axes
        tifffile.imwrite(tmp, _tiles(planes, shape), shape=shape, dtype=np.int32,
                         compression="zlib", tile=(TIFF_TILE, TIFF_TILE), **meta)
    elif name.endswith(".npy"):
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.int32, shape=shape)
        for index, plane in zip(lead, planes, strict=True):
            out[index] = plane
        out.flush()
        del out
    else:
        import zarr

        array = zarr.create_array(str(tmp), shape=shape, dtype="int32", overwrite=True,
                                  chunks=(*([1] * (len(shape) - 2)), *shape[-2:]))
        for index, plane in zip(lead, planes, strict=True):
            array[index] = plane
        if provenance is not None:
            array.attrs[ATTR] = provenance.to_dict()


def write_table(path: Path, columns: Sequence[str], rows: Iterable[dict],
                replace: bool = True) -> Path:
    """Write rows as CSV with ``columns`` in order (written to a temporary name, then renamed).

    ``replace`` as in :func:`write_labels`.
    """
    with atomic_output(path, replace=replace) as tmp, \
            open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path
