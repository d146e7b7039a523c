"""napari reader for the labels TIFFs this plugin writes: a Labels layer with its scale.

"Save labels..." as ``.ome.tif`` and ``--out x.ome.tif`` write an OME-TIFF whose image is
named :data:`~napari_sam3_onnx.api.labels_files.TIFF_LABELS_NAME`; this reader (registered for
``*.ome.tif`` and ``*.ome.tiff`` only, so napari does not ask which reader to use for every
TIFF) opens exactly those as Labels, with the Z, Y and X pixel sizes and units of their
OME-XML (napari's built-in reader would show them with scale 1). Every other TIFF is left to
other readers (:func:`get_reader` returns None).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from napari_sam3_onnx.api.labels_files import OME_UNITS, TIFF_LABELS_NAME

_UNIT_NAMES = {symbol: name for name, symbol in OME_UNITS.items()}


def _pixels(path: Path) -> tuple[dict, str] | None:
    """The OME ``Pixels`` attributes and series axes of one of our labels TIFFs, else None."""
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            xml, shaped = tif.ome_metadata, tif.shaped_metadata or ()
            axes = tif.series[0].axes
    except Exception:  # not a TIFF tifffile can read: another reader's business
        return None
    if not xml:  # a length-1 axis: tifffile's shaped description holds the metadata
        meta = next((m for m in shaped if isinstance(m, dict)), {})
        return (meta, axes) if meta.get("Name") == TIFF_LABELS_NAME else None
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return None
    ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
    image = root.find(f"{ns}Image")
    if image is None or image.get("Name") != TIFF_LABELS_NAME:
        return None
    pixels = image.find(f"{ns}Pixels")
    return ({} if pixels is None else dict(pixels.attrib)), axes


def get_reader(path):
    """The reader for ``path`` if it is a labels TIFF written here, else None (npe2)."""
    if not isinstance(path, str | Path):
        return None
    if not str(path).lower().endswith((".ome.tif", ".ome.tiff")):
        return None
    return read_labels if Path(path).is_file() and _pixels(Path(path)) else None


def read_labels(path) -> list[tuple]:
    """``[(data, kwargs, "labels")]``: the int32 labels, name (file stem), scale and units.

    Axes without a recorded size keep scale 1; units are given when every axis has one.
    """
    import tifffile

    path = Path(path)
    found = _pixels(path)
    meta, axes = found if found is not None else ({}, "")
    data = tifffile.imread(path)
    scale = [1.0] * data.ndim
    units: list[str | None] = [None] * data.ndim
    for i, letter in enumerate(axes.upper()[-data.ndim:] if axes else ""):
        size = meta.get(f"PhysicalSize{letter}")
        if size is not None:
            scale[i] = float(size)
            units[i] = _UNIT_NAMES.get(str(meta.get(f"PhysicalSize{letter}Unit")))
    name = path.name
    for suffix in (".ome.tiff", ".ome.tif", ".tiff", ".tif"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    kwargs: dict = {"name": name, "scale": scale}
    if all(units):
        kwargs["units"] = units
    return [(np.asarray(data), kwargs, "labels")]
