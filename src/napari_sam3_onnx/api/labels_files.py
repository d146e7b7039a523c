"""Labels files: the one writer (and reader) of labels outputs for the CLI, the series, the dock.

Formats, chosen by the file name's ending (:func:`format_of`):

* ``.tif`` / ``.tiff``: an OME-TIFF of int32 labels, zlib-compressed 256-px tiles, the axes
  and physical pixel sizes in its OME-XML, the provenance record in the image's
  ``Description``.
* ``.npy``: a NumPy int32 array; the provenance record in a sidecar JSON
  (:func:`~.provenance.sidecar`), renamed into place right after the labels.
* ``.zarr``: a plain zarr array (one chunk per plane), the record in its attributes.
* ``.ome.zarr`` or ``IMAGE/labels/NAME``: NGFF labels (:mod:`.ngff`), the record in the
  labels group's attributes.

Every write goes to a temporary sibling that takes the name only when complete
(:mod:`napari_sam3_onnx.models.atomic`): an interrupted write leaves no half-written labels and
an old file of that name intact. Whether an existing name may be replaced is the caller's
decision (the CLI's ``--overwrite``, a confirmation in the dock); by default it is not, and a
name taken meanwhile keeps the new labels under a free name
(:class:`~.atomic.OutputTakenError` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .atomic import (
    OutputTakenError,
    atomic_output,
    keep_new,
    new_sibling,
    remove_ours,
    replace_into,
)
from .ngff import CHUNK, is_ngff_output, write_ngff_labels
from .provenance import ATTR, Provenance, sidecar

#: Endings of a labels file name (``.ome.zarr`` ends in ``.zarr``).
LABEL_SUFFIXES = (".tif", ".tiff", ".npy", ".zarr")
#: Format name -> file name ending, for a choice of format (the image series, the dock).
FORMATS = {"tif": ".tif", "npy": ".npy", "ome.zarr": ".ome.zarr"}
#: Side of the square TIFF tiles (a multiple of 16, as TIFF requires).
TIFF_TILE = 256
#: OME axes of a labels stack by its number of dimensions.
DEFAULT_AXES = {2: "YX", 3: "ZYX", 4: "TZYX"}
#: The OME ``Image`` name of every labels TIFF written here (how a reader knows it for labels).
TIFF_LABELS_NAME = "napari-sam3-onnx labels"
#: Length unit names (as napari and NGFF spell them) -> OME-TIFF unit symbols, and back.
OME_UNITS = {"micrometer": "\u00b5m", "nanometer": "nm", "millimeter": "mm",
             "meter": "m", "pixel": "pixel"}


def format_of(path: Path) -> str:
    """The :data:`FORMATS` name of a labels file name (``.tiff`` is ``"tif"``).

    Raises
    ------
    ValueError
        Another ending (a plain ``.zarr`` array is not one of the choices).
    """
    name = Path(path).name.lower()
    for fmt, suffix in sorted(FORMATS.items(), key=lambda kv: -len(kv[1])):
        if name.endswith(suffix):
            return fmt
    if name.endswith(".tiff"):
        return "tif"
    raise ValueError(f"{path}: not a {', '.join(FORMATS.values())} labels file name")


def is_labels_name(path: Path) -> bool:
    """Whether ``path`` names a labels output this module writes (any format above)."""
    return Path(path).name.lower().endswith(LABEL_SUFFIXES) or is_ngff_output(Path(path))


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
        del plane  # not held while the next plane is made
    expected = int(np.prod(shape[:-2], dtype=np.int64))
    if n != expected:
        raise ValueError(f"{n} label planes for a stack of {expected}")


def _physical(axes: str, scale: Sequence[float], units: Sequence[str | None]) -> dict:
    """OME ``PhysicalSize{Z,Y,X}`` (and units) of the axes that have one."""
    meta: dict = {}
    for letter, size, unit in zip(axes.upper(), scale, units, strict=True):
        if letter in "ZYX":
            meta[f"PhysicalSize{letter}"] = float(size)
            if unit in OME_UNITS:
                meta[f"PhysicalSize{letter}Unit"] = OME_UNITS[unit]
    return meta


def tiff_metadata(ndim: int, pixel_size: tuple[float, float] | None,
                  axes: str | None = None, description: str | None = None,
                  scale: Sequence[float] | None = None,
                  units: Sequence[str | None] | None = None) -> dict:
    """Keywords for tifffile.imwrite: an OME-TIFF with ``axes`` and, if known, the pixel size.

    Parameters
    ----------
    ndim : int
        Dimensions of the labels array (2 to 5).
    pixel_size : (float, float) or None
        ``(row, col)`` pixel size in micrometres.
    axes : str, optional
        OME axis letters, one per dimension (default :data:`DEFAULT_AXES`).
    description : str, optional
        The OME image's ``Description`` (the provenance record, :mod:`.provenance`).
    scale : sequence of float, optional
        Size of a pixel along every axis (a napari layer's ``scale``); the ``Z``, ``Y`` and
        ``X`` axes' sizes are recorded. Takes precedence over ``pixel_size``.
    units : sequence of str or None, optional
        The unit of every axis of ``scale`` (:data:`OME_UNITS` names; others are left out).
    """
    letters = axes or DEFAULT_AXES.get(ndim, "Q" * (ndim - 2) + "YX")
    meta: dict = {"axes": letters, "Name": TIFF_LABELS_NAME}
    if description is not None:
        meta["Description"] = description
    kwargs: dict = {"ome": True, "photometric": "minisblack"}
    if scale is None and pixel_size is not None:
        scale = [1.0] * (ndim - 2) + [float(v) for v in pixel_size]
        units = [None] * (ndim - 2) + ["micrometer"] * 2
        letters = "Q" * (ndim - 2) + "YX"  # only rows and columns have a known size
    if scale is not None:
        meta.update(_physical(letters, scale, units or [None] * ndim))
        dy, dx = (float(v) for v in scale[-2:])
        if units is not None and list(units[-2:]) == ["micrometer"] * 2:
            kwargs.update(resolution=(1e4 / dx, 1e4 / dy), resolutionunit="CENTIMETER")
    kwargs["metadata"] = meta
    return kwargs


def ngff_metadata(ndim: int, pixel_size: tuple[float, float] | None,
                  axes: str | None = None) -> dict:
    """Keywords for :func:`~.ngff.write_ngff_labels`: axes and, if known, the pixel size.

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
                 like: Path | None = None, replace: bool = False,
                 provenance: Provenance | None = None, *,
                 scale: Sequence[float] | None = None,
                 translation: Sequence[float] | None = None,
                 units: Sequence[str | None] | None = None,
                 colours: Callable[[int], Sequence[int]] | None = None) -> Path:
    """Write int32 label planes (C order over the leading axes) to a new file, then rename.

    Parameters
    ----------
    path : Path
        The output; its format follows its name (see the module notes).
    shape : sequence of int
        ``(..., rows, cols)`` of the whole labels array (2 to 5 dimensions).
    planes : iterable of numpy.ndarray
        ``(rows, cols)`` integer planes in C order over the leading axes, cast to int32; only
        one is held at a time.
    pixel_size : (float, float), optional
        ``(row, col)`` micrometres per pixel, recorded in a TIFF or OME-Zarr.
    axes : str, optional
        Axis letters, one per dimension (``"ZYX"``; default :data:`DEFAULT_AXES`).
    like : Path, optional
        The OME-Zarr input image when the labels have its axes in its order: OME-Zarr labels
        then take its scale on every axis (see :func:`~.ngff.write_ngff_labels`).
    replace : bool
        An existing ``path`` may be replaced (the user named it and agreed). If False the
        result takes the name only if it is still free when the work is done, else it is kept
        under a new name and :class:`~.atomic.OutputTakenError` says which.
    provenance : Provenance, optional
        What made the labels, written inside the output or, for ``.npy``, to its sidecar.
    scale, translation, units : sequence, optional
        Per-axis pixel size, position of pixel ``(0, ..., 0)`` and unit names (a napari
        layer's); they replace ``pixel_size``. A TIFF records the Z, Y and X sizes and units
        (no translation), OME-Zarr all of them; ``.npy`` and plain ``.zarr`` none.
    colours : callable, optional
        ``label id -> (r, g, b, a)`` in 0-255 for OME-Zarr's ``image-label`` colours.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    shape = tuple(int(s) for s in shape)
    if is_ngff_output(path):
        record = None if provenance is None else {ATTR: provenance.to_dict()}
        meta = ngff_metadata(len(shape), pixel_size, axes)
        if scale is not None:
            meta.update(scale=scale, units=units)
        return write_ngff_labels(path, shape, planes, like=like, replace=replace,
                                 attributes=record, translation=translation,
                                 colours=colours, **meta)
    name = path.name.lower()
    side = None
    if provenance is not None and name.endswith(".npy"):
        side = new_sibling(sidecar(path))
    try:
        with atomic_output(path, directory=name.endswith(".zarr"), replace=replace) as tmp:
            if name.endswith((".tif", ".tiff")):
                text = None if provenance is None else provenance.to_json()
                _write_tiff(tmp, shape, planes, tiff_metadata(len(shape), pixel_size, axes,
                                                              text, scale, units))
            else:
                _write_array(tmp, name, shape, planes, provenance)
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


def _write_tiff(tmp: Path, shape: tuple[int, ...], planes: Iterable[np.ndarray],
                meta: dict) -> None:
    import tifffile

    if 1 in shape[:-2]:  # OME readers drop length-1 axes: 1 x Y x X would read as Y x X;
        meta["ome"] = False  # tifffile's shaped description keeps the shape and the axes
    tifffile.imwrite(tmp, _tiles(planes, shape), shape=shape, dtype=np.int32,
                     compression="zlib", tile=(TIFF_TILE, TIFF_TILE), **meta)


def _write_array(tmp: Path, name: str, shape: tuple[int, ...], planes: Iterable[np.ndarray],
                 provenance: Provenance | None) -> None:
    lead = list(np.ndindex(*shape[:-2]))
    if name.endswith(".npy"):
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.int32, shape=shape)
        for index, plane in zip(lead, planes, strict=True):
            out[index] = plane
        out.flush()
        del out
        return
    import zarr

    # Chunks of at most CHUNK x CHUNK pixels, written one band of chunk rows at a time: zarr
    # copies what it is given and encodes each chunk through temporary buffers, so one
    # whole-plane chunk of a 2048^2 plane held about four planes at once.
    rows, cols = shape[-2:]
    array = zarr.create_array(str(tmp), shape=shape, dtype="int32", overwrite=True,
                              chunks=(*([1] * (len(shape) - 2)), min(rows, CHUNK),
                                      min(cols, CHUNK)))
    for index, plane in zip(lead, planes, strict=True):
        for top in range(0, rows, CHUNK):
            array[(*index, slice(top, top + CHUNK))] = plane[top:top + CHUNK]
        del plane  # not held while the next plane is made
    if provenance is not None:
        array.attrs[ATTR] = provenance.to_dict()


def write_plane_labels(path: Path, labels: np.ndarray, replace: bool = False,
                       provenance: Provenance | None = None) -> Path:
    """:func:`write_labels` for one ``(rows, cols)`` integer labels plane (axes ``YX``)."""
    plane = np.asarray(labels)
    if plane.ndim != 2 or not np.issubdtype(plane.dtype, np.integer):
        raise ValueError(f"expected (rows, cols) integer labels, got {plane.dtype} "
                         f"{plane.shape}")
    format_of(path)  # one of the choices
    return write_labels(Path(path), plane.shape, [plane], axes="YX", replace=replace,
                        provenance=provenance)


def read_plane_labels(path: Path) -> np.ndarray:
    """A one-plane labels file as an int32 ``(rows, cols)`` array (length-1 axes dropped)."""
    from .io import read_image

    data = np.asarray(read_image(path))
    while data.ndim > 2 and data.shape[0] == 1:
        data = data[0]
    if data.ndim != 2:
        raise ValueError(f"{path}: labels of shape {data.shape}, not one plane")
    return data.astype(np.int32, copy=False)
