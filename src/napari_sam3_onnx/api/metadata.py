"""What an image file says about its axes and pixels, for the outputs' metadata."""

from __future__ import annotations

from pathlib import Path

#: Micrometres per unit, for pixel sizes given in other units.
_MICRONS = {"nm": 1e-3, "nanometer": 1e-3, "um": 1.0, "\u00b5m": 1.0, "micron": 1.0,
            "micrometer": 1.0, "mm": 1e3, "millimeter": 1e3, "cm": 1e4, "centimeter": 1e4}


def pixel_size(path: Path | str, series: int | None = None) -> tuple[float, float] | None:
    """The ``(row, col)`` pixel size of an image file in micrometres, when it records one.

    Read from OME-XML (``PhysicalSizeY/X``), ImageJ metadata with a length unit, TIFF
    resolution tags in centimetres or inches, or an OME-Zarr image's scale. None when the
    file says nothing (or something this function does not understand): no size is invented.
    ``series``: a TIFF's image series, as given to :func:`~.io.read_image`.
    """
    path = Path(path)
    try:
        if path.name.lower().endswith((".tif", ".tiff")):
            return _tiff_pixel_size(path, series)
        if path.is_dir():
            return _zarr_pixel_size(path)
    except Exception:  # metadata is a bonus: an odd header must not stop the run
        return None
    return None


def _tiff_pixel_size(path: Path, series: int | None) -> tuple[float, float] | None:
    import tifffile

    from .tiff_series import choose_series

    with tifffile.TiffFile(path) as tf:
        index = choose_series(tf, path, announce=False, series=series)  # read_image's
        if tf.is_ome and tf.ome_metadata:
            import xml.etree.ElementTree as ET

            pixels = [el for el in ET.fromstring(tf.ome_metadata).iter()
                      if el.tag.endswith("Pixels")]  # one per OME Image, in series order
            el = pixels[index] if index < len(pixels) else None
            if el is not None and "PhysicalSizeX" in el.attrib:
                dx = _ome_size(el.attrib, "X")
                return (_ome_size(el.attrib, "Y") if "PhysicalSizeY" in el.attrib
                        else dx), dx
        page = tf.series[index].keyframe if len(tf.series) > 1 else tf.pages.first
        tags = page.tags
        if "XResolution" not in tags or "YResolution" not in tags:
            return None
        unit = int(tags["ResolutionUnit"].value) if "ResolutionUnit" in tags else 1
        per_unit = {2: 25400.0, 3: 1e4}.get(unit)
        if per_unit is None and tf.is_imagej:
            per_unit = _MICRONS.get(str((tf.imagej_metadata or {}).get("unit", "")).lower())
        if per_unit is None:
            return None
        (xn, xd), (yn, yd) = tags["XResolution"].value, tags["YResolution"].value
        if not (xn and yn and xd and yd):
            return None
        return per_unit * yd / yn, per_unit * xd / xn


def _zarr_pixel_size(path: Path) -> tuple[float, float] | None:
    import zarr

    node = zarr.open(str(path), mode="r")
    attrs = node.attrs.asdict()
    ms = (attrs.get("multiscales") or attrs.get("ome", {}).get("multiscales") or [None])[0]
    if not ms:
        return None
    axes = ms.get("axes", [])
    scale = next((t["scale"] for t in ms["datasets"][0].get("coordinateTransformations", [])
                  if t.get("type") == "scale"), None)
    if scale is None or len(axes) != len(scale) or len(axes) < 2:
        return None
    units = [_MICRONS.get(str(a.get("unit", "")).lower()) if isinstance(a, dict) else None
             for a in axes[-2:]]
    row_unit, col_unit = units
    if row_unit is None or col_unit is None:
        return None
    return float(scale[-2]) * row_unit, float(scale[-1]) * col_unit


def _ome_size(attrib: dict, axis: str) -> float:
    unit = attrib.get(f"PhysicalSize{axis}Unit", "\u00b5m")
    return float(attrib[f"PhysicalSize{axis}"]) * _MICRONS[unit.lower()]


#: OME axis letters a labels TIFF may carry (Q, I and the like mean "unknown" and are not kept).
KNOWN_AXES = "TZCYX"


def image_axes(path: Path | str, series: int | None = None) -> str | None:
    """The axis letters of an image file as :func:`~.io.read_image` presents it (e.g. ``"TZYX"``).

    From a TIFF's series (OME or ImageJ metadata) or an OME-Zarr image's axes (singleton
    ``c``/``t`` axes left out, as the reader drops them). None when the file does not say.
    ``series``: a TIFF's image series, as given to :func:`~.io.read_image`.
    """
    path = Path(path)
    try:
        if path.name.lower().endswith((".tif", ".tiff")):
            import tifffile

            from .tiff_series import choose_series

            with tifffile.TiffFile(path) as tf:
                index = choose_series(tf, path, announce=False, series=series)
                return str(tf.series[index].axes).upper()
        if path.is_dir():
            import zarr

            node = zarr.open(str(path), mode="r")
            attrs = node.attrs.asdict()
            ms = (attrs.get("multiscales") or attrs.get("ome", {}).get("multiscales") or [None])
            if not ms[0]:
                return None
            names = [a["name"] if isinstance(a, dict) else str(a) for a in ms[0]["axes"]]
            shape = node[ms[0]["datasets"][0]["path"]].shape
            return "".join(n.upper() for n, s in zip(names, shape, strict=True)
                           if not (n in ("c", "t") and s == 1))
    except Exception:  # metadata is a bonus: an odd header must not stop the run
        return None
    return None
