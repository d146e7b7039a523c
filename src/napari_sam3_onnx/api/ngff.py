"""Labels as OME-Zarr (NGFF): a labels image of its own, or ``labels/<name>`` inside an image.

What is written follows the NGFF specification's labels section:

* a standalone ``labels.ome.zarr`` is NGFF 0.4 in zarr format 2 (https://ngff.openmicroscopy.org/0.4/),
  the version napari-ome-zarr, Fiji (MoBIE, n5-viewer / BigDataViewer), OMERO and vizarr all read;
* labels written into an existing OME-Zarr image take that image's version: ``labels/<name>``
  in zarr format 2 for 0.4 images, format 3 with the ``"ome"`` attribute key for 0.5 images
  (https://ngff.openmicroscopy.org/0.5/).

Each labels image is a ``multiscales`` group (axes with types and units, one ``scale`` and
optionally one ``translation`` per level; levels ``0``, ``1``, ... are the full-resolution
labels and every second row and column of the previous level, so ids stay ids) with
``image-label`` metadata: a colour per label id and, inside an image, ``source`` pointing back
to it. Planes are written one at a time in ``(1, ..., rows, cols)`` chunks; the whole stack
is never in memory. A labels group is written under a temporary sibling name and renamed into
place when complete (:mod:`.atomic`); the image's own arrays are never opened for writing.
"""

from __future__ import annotations

import colorsys
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from .atomic import OutputTakenError, atomic_output

#: File name ending of a standalone NGFF labels image.
NGFF_SUFFIX = ".ome.zarr"
#: Axis types of NGFF's axes by letter.
AXIS_TYPES = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
#: Axis letters by number of dimensions, when the input does not name them.
DEFAULT_AXES = {2: "yx", 3: "zyx", 4: "tzyx", 5: "tczyx"}
#: Length and time units NGFF accepts (UDUNITS-2 names) that a layer or file may carry.
UNITS = {"angstrom", "nanometer", "micrometer", "millimeter", "centimeter", "meter",
         "second", "millisecond", "minute", "hour"}
#: A level is added while the previous one is larger than this (in rows or columns).
LEVEL_SIDE = 1024
#: Side of the chunks in rows and columns.
CHUNK = 1024

RGBA = tuple[int, int, int, int]


def _attrs(path: Path) -> dict | None:
    """The attributes of the zarr group at ``path`` (NGFF keys lifted out of ``"ome"``)."""
    try:
        if (path / "zarr.json").is_file():
            meta = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
            if meta.get("node_type") != "group":
                return None
            attrs = meta.get("attributes", {})
            return {**attrs, **attrs.get("ome", {})}
        if (path / ".zgroup").is_file():
            zattrs = path / ".zattrs"
            return json.loads(zattrs.read_text(encoding="utf-8")) if zattrs.is_file() else {}
    except (OSError, ValueError, AttributeError):
        return None
    return None


def is_ngff_image(path: Path) -> bool:
    """Whether ``path`` is an OME-Zarr image group (``multiscales``, not itself labels)."""
    attrs = _attrs(Path(path))
    return bool(attrs and attrs.get("multiscales") and "image-label" not in attrs)


def is_ngff_labels(path: Path) -> bool:
    """Whether ``path`` is an NGFF labels image (``multiscales`` with ``image-label``)."""
    attrs = _attrs(Path(path))
    return bool(attrs and attrs.get("multiscales") and "image-label" in attrs)


def image_of_labels(path: Path) -> Path | None:
    """The OME-Zarr image that ``path`` = ``IMAGE/labels/NAME`` would add labels to, or None."""
    path = Path(path)
    if path.parent.name != "labels" or path.name in ("", ".", ".."):
        return None
    image = path.parent.parent
    return image if is_ngff_image(image) else None


def is_ngff_output(path: Path) -> bool:
    """Whether ``--out path`` asks for NGFF labels: ``*.ome.zarr`` or ``IMAGE/labels/NAME``."""
    path = Path(path)
    return path.name.lower().endswith(NGFF_SUFFIX) or image_of_labels(path) is not None


def label_colour(label: int) -> RGBA:
    """A distinct, stable colour for a label id (golden-ratio hue steps), as 0-255 RGBA."""
    hue = (int(label) * 0.6180339887) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.75, 0.95)
    return int(r * 255), int(g * 255), int(b * 255), 255


def ngff_axes(ndim: int, letters: str | None = None,
              units: Sequence[str | None] | None = None) -> list[dict]:
    """NGFF ``axes`` for labels of ``ndim`` dimensions.

    Parameters
    ----------
    letters : str, optional
        One axis letter per dimension (``"ZYX"``). Used when NGFF allows the order (time, then
        channel, then 2 or 3 space axes ending in y, x); otherwise :data:`DEFAULT_AXES`.
    units : sequence of str or None, optional
        One unit per dimension (None: unknown; names outside :data:`UNITS` are left out).
    """
    names = (letters or "").lower()
    if len(names) != ndim or not _valid_order(names):
        names = DEFAULT_AXES.get(ndim, "")
    if len(names) != ndim:
        raise ValueError(f"NGFF labels have 2 to 5 dimensions, not {ndim}")
    units = list(units) if units is not None else [None] * ndim
    out = []
    for name, unit in zip(names, units, strict=True):
        axis = {"name": name, "type": AXIS_TYPES[name]}
        if unit in UNITS:
            axis["unit"] = unit
        out.append(axis)
    return out


def _valid_order(names: str) -> bool:
    if len(set(names)) != len(names) or not set(names) <= set(AXIS_TYPES):
        return False
    kinds = [AXIS_TYPES[n] for n in names]
    spaces = kinds.count("space")
    return (names.endswith("yx") and spaces in (2, 3)
            and kinds == sorted(kinds, key=["time", "channel", "space"].index))


def _factors(rows: int, cols: int) -> list[int]:
    factors = [1]
    while max(-(-rows // factors[-1]), -(-cols // factors[-1])) > LEVEL_SIDE and len(factors) < 6:
        factors.append(factors[-1] * 2)
    return factors


def _label_ids(plane: np.ndarray) -> Iterable[int]:
    top = int(plane.max())
    if plane.min() >= 0 and top < (1 << 22):
        counts = np.bincount(plane.ravel(), minlength=top + 1)
        return [int(v) for v in np.flatnonzero(counts[1:]) + 1]
    return [int(v) for v in np.unique(plane) if v != 0]


def _ome_attrs(version: str, body: dict) -> dict:
    """Attributes in the layout of ``version``: top level for 0.4, under ``"ome"`` for 0.5."""
    return {"ome": {"version": version, **body}} if version != "0.4" else body


def _write_group(folder: Path, shape: tuple[int, ...], planes: Iterable[np.ndarray],
                 zarr_format: int, version: str, multiscale: dict,
                 colours: Callable[[int], Sequence[int]], source: str | None,
                 attributes: Mapping[str, object] | None = None) -> None:
    import zarr

    rows, cols = shape[-2:]
    lead = shape[:-2]
    root = zarr.open_group(str(folder), mode="w", zarr_format=zarr_format)
    names = [a["name"] for a in multiscale["axes"]]
    encoding = ({"chunk_key_encoding": {"name": "v2", "separator": "/"}}
                if zarr_format == 2 else {"dimension_names": names})
    factors = _factors(rows, cols)
    arrays = []
    for level, f in enumerate(factors):
        r, c = -(-rows // f), -(-cols // f)
        arrays.append(root.create_array(
            str(level), shape=(*lead, r, c), dtype="int32", fill_value=0,
            chunks=(*([1] * len(lead)), min(r, CHUNK), min(c, CHUNK)), **encoding))
    ids: set[int] = set()
    count = 0
    for index, plane in zip(np.ndindex(*lead), planes, strict=True):
        plane = np.asarray(plane, np.int32)
        if plane.shape != (rows, cols):
            raise ValueError(f"label plane {plane.shape} is not {(rows, cols)}")
        count += 1
        if not plane.any():
            continue  # the arrays read as 0 where nothing was written
        for f, array in zip(factors, arrays, strict=True):
            array[index] = plane[::f, ::f]
        ids.update(_label_ids(plane))
    expected = int(np.prod(lead, dtype=np.int64))
    if count != expected:
        raise ValueError(f"{count} label planes for a stack of {expected}")
    base = multiscale["datasets"][0]["coordinateTransformations"]
    datasets = []
    for level, f in enumerate(factors):
        scale = [float(s) for s in base[0]["scale"]]
        scale[-2:] = [scale[-2] * f, scale[-1] * f]
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": scale}, *base[1:]]})
    ms = {**multiscale, "datasets": datasets, "type": "nearest"}
    label: dict[str, object] = {
        "colors": [{"label-value": i, "rgba": [int(v) for v in colours(i)]} for i in sorted(ids)]}
    if source is not None:
        label["source"] = {"image": source}
    if version == "0.4":
        ms, label = {"version": version, **ms}, {"version": version, **label}
    root.attrs.update({**(attributes or {}),
                       **_ome_attrs(version, {"multiscales": [ms], "image-label": label})})


def image_transform(image: Path, shape: Sequence[int]) -> dict | None:
    """``scale``, ``translation``, ``units`` and ``axes`` of an OME-Zarr image's full level.

    Singleton ``c``/``t`` axes are left out, as :func:`~.io.read_image` leaves them out. None
    unless what remains has exactly ``shape``: only then are these labels of that image,
    pixel for pixel, and take its physical sizes on every axis (z included).
    """
    import zarr

    attrs = _attrs(Path(image)) or {}
    try:
        ms = attrs["multiscales"][0]
        names = [a["name"] if isinstance(a, dict) else str(a) for a in ms["axes"]]
        units = [a.get("unit") if isinstance(a, dict) else None for a in ms["axes"]]
        dataset = ms["datasets"][0]
        full = zarr.open_array(str(Path(image) / dataset["path"]), mode="r").shape
        scale = [1.0] * len(names)
        translation = [0.0] * len(names)
        for t in [*ms.get("coordinateTransformations", []),
                  *dataset.get("coordinateTransformations", [])]:
            if t.get("type") == "scale":
                scale = [a * float(b) for a, b in zip(scale, t["scale"], strict=True)]
            elif t.get("type") == "translation":
                translation = [a + float(b) for a, b in zip(translation, t["translation"],
                                                            strict=True)]
    except (KeyError, IndexError, TypeError, ValueError, OSError):
        return None
    keep = [i for i, n in enumerate(names) if not (n in ("c", "t") and full[i] == 1)]
    if [int(full[i]) for i in keep] != [int(s) for s in shape]:
        return None
    return {"scale": [scale[i] for i in keep], "translation": [translation[i] for i in keep],
            "units": [units[i] for i in keep], "axes": "".join(names[i] for i in keep)}


def _image_format(image: Path) -> tuple[int, str]:
    """``(zarr_format, NGFF version)`` of an OME-Zarr image group."""
    if (image / "zarr.json").is_file():
        return 3, str((_attrs(image) or {}).get("version", "0.5"))
    ms = (_attrs(image) or {}).get("multiscales") or [{}]
    return 2, str(ms[0].get("version", "0.4"))


def _register(image: Path, name: str | None, zarr_format: int, version: str) -> None:
    """Add ``name`` to the ``labels`` list of ``image/labels`` (creating that group)."""
    import zarr

    group = zarr.open_group(str(image / "labels"), mode="a", zarr_format=zarr_format)
    attrs = group.attrs.asdict()
    names = list((attrs.get("ome", attrs) if version != "0.4" else attrs).get("labels", []))
    if name is not None and name not in names:
        names.append(name)
    group.attrs.update(_ome_attrs(version, {"labels": names}))


def write_ngff_labels(path: Path, shape: Sequence[int], planes: Iterable[np.ndarray], *,
                      scale: Sequence[float] | None = None,
                      translation: Sequence[float] | None = None,
                      units: Sequence[str | None] | None = None, axes: str | None = None,
                      colours: Callable[[int], Sequence[int]] | None = None,
                      like: Path | None = None, replace: bool = True,
                      attributes: Mapping[str, object] | None = None) -> Path:
    """Write int32 label planes as an NGFF labels image (see the module notes).

    Parameters
    ----------
    path : Path
        ``name.ome.zarr`` (a labels image of its own, NGFF 0.4) or ``IMAGE/labels/NAME`` for an
        OME-Zarr image ``IMAGE`` (its version). Whether it may be replaced is the caller's
        decision, taken before the work (:mod:`napari_sam3_onnx.cli.guard`, the widget's
        confirmation); an existing labels group of that name is replaced as a whole.
    shape : sequence of int
        ``(..., rows, cols)`` of the whole labels array (2 to 5 dimensions).
    planes : iterable of numpy.ndarray
        ``(rows, cols)`` integer planes in C order over the leading axes; one is held at a time.
    scale, translation : sequence of float, optional
        Per-axis physical size of a pixel and position of pixel ``(0, ..., 0)`` (default 1, 0).
    units : sequence of str or None, optional
        Per-axis units (``"micrometer"``; None or an unknown name: left out).
    axes : str, optional
        Axis letters (``"ZYX"``) when known.
    colours : callable, optional
        ``label id -> (r, g, b, a)`` in 0-255 (default :func:`label_colour`).
    like : Path, optional
        An OME-Zarr image these labels were computed from, axis for axis: when its full level
        has ``shape`` (:func:`image_transform`), its scale, translation, units and axes are
        used instead of the ones given. Labels written into an image are always checked
        against that image this way.
    replace : bool
        An existing ``path`` may be replaced; if False and someone creates ``path`` during
        the write, the labels are kept under a new name (:class:`~.atomic.OutputTakenError`).
    attributes : mapping, optional
        More attributes of the labels group (JSON values), written before it is renamed into
        place (the provenance record, :mod:`napari_sam3_onnx.api.provenance`).

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    shape = tuple(int(s) for s in shape)
    ndim = len(shape)
    image = image_of_labels(path)
    reference = image if image is not None else like
    same = image_transform(reference, shape) if reference is not None else None
    if same is not None:
        scale, translation = same["scale"], same["translation"]
        units, axes = same["units"], same["axes"]
    multiscale = {"name": path.name.removesuffix(NGFF_SUFFIX) or "labels",
                  "axes": ngff_axes(ndim, axes, units)}
    transforms: list[dict] = [{"type": "scale", "scale": [float(s) for s in (
        scale if scale is not None else [1.0] * ndim)]}]
    if translation is not None and any(float(t) for t in translation):
        transforms.append({"type": "translation",
                           "translation": [float(t) for t in translation]})
    if any(len(t.get("scale", t.get("translation", []))) != ndim for t in transforms):
        raise ValueError(f"scale/translation need {ndim} values")
    multiscale["datasets"] = [{"path": "0", "coordinateTransformations": transforms}]
    colours = colours or label_colour
    if image is None:
        with atomic_output(path, directory=True, replace=replace) as tmp:
            _write_group(tmp, shape, planes, 2, "0.4", multiscale, colours, None, attributes)
        return path
    zarr_format, version = _image_format(image)
    if not (image / "labels").exists():
        _register(image, None, zarr_format, version)  # the folder the sibling goes in
    try:
        with atomic_output(path, directory=True, replace=replace) as tmp:
            _write_group(tmp, shape, planes, zarr_format, version, multiscale, colours,
                         "../../", attributes)
    except OutputTakenError as taken:
        _register(image, taken.kept.name, zarr_format, version)
        raise
    _register(image, path.name, zarr_format, version)
    return path
