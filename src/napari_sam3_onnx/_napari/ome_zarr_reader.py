"""napari reader for NGFF labels images (``*.ome.zarr`` with ``image-label``): Labels layers.

What "Save labels as OME-Zarr..." and ``--out x.ome.zarr`` write opens again as a Labels layer
with its scale, translation and units, whatever other zarr readers are installed (napari's
built-in reader would show it as an Image with scale 1). Any other path is left to other
readers (:func:`get_reader` returns None). When the dock saves a file it also records this
reader as napari's preferred reader for that one path (:func:`prefer_for`), so reopening it
does not ask which plugin to use.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from napari_sam3_onnx.api.ngff import NGFF_SUFFIX, is_ngff_labels

PLUGIN = "napari-sam3-onnx"


def get_reader(path):
    """The reader for ``path`` if it is one NGFF labels image, else None (npe2 ``get_reader``)."""
    if not isinstance(path, str | Path) or not is_ngff_labels(Path(path)):
        return None
    return read_labels


def _transforms(entries: list[dict], ndim: int) -> tuple[list[float], list[float]]:
    scale, translate = [1.0] * ndim, [0.0] * ndim
    for t in entries:
        if t.get("type") == "scale":
            scale = [float(v) for v in t["scale"]]
        elif t.get("type") == "translation":
            translate = [float(v) for v in t["translation"]]
    return scale, translate


def read_labels(path) -> list[tuple]:
    """``[(data, kwargs, "labels")]``: the levels (multiscale when several) of ``path``.

    ``kwargs`` hold the name (the folder's, without ``.ome.zarr``), the full level's scale and
    translation (multiscale-level then dataset transforms, as NGFF composes them) and the
    axes' units where the file names them.
    """
    import zarr

    path = Path(path)
    group = zarr.open_group(str(path), mode="r")
    attrs = group.attrs.asdict()
    attrs = {**attrs, **attrs.get("ome", {})}
    ms = attrs["multiscales"][0]
    axes = ms.get("axes", [])
    levels = [group[d["path"]] for d in ms["datasets"]]
    ndim = levels[0].ndim
    scale, translate = _transforms(ms["datasets"][0].get("coordinateTransformations", []), ndim)
    outer_scale, outer_shift = _transforms(ms.get("coordinateTransformations", []), ndim)
    scale = list(np.multiply(scale, outer_scale))
    translate = list(np.add(np.multiply(translate, outer_scale), outer_shift))
    name = path.name[: -len(NGFF_SUFFIX)] if path.name.lower().endswith(NGFF_SUFFIX) \
        else path.name
    kwargs: dict = {"name": name, "scale": scale, "translate": translate,
                    "multiscale": len(levels) > 1}
    units = [a.get("unit") if isinstance(a, dict) else None for a in axes]
    if len(units) == ndim and all(units):
        kwargs["units"] = units
    data = levels if len(levels) > 1 else levels[0]
    return [(data, kwargs, "labels")]


def prefer_for(path: Path) -> None:
    """Make this plugin napari's preferred reader for exactly ``path`` (a file the dock saved)."""
    try:
        from napari.settings import get_settings

        plugins = get_settings().plugins
        key = os.path.realpath(path)
        if Path(path).is_dir():
            key += os.sep  # how napari spells a folder it matches
        plugins.extension2reader = {**plugins.extension2reader, key: PLUGIN}
    except (ImportError, AttributeError, ValueError):  # an older napari: the dialog asks
        return
