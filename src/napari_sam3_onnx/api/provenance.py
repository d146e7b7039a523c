"""What made a labels output: one JSON record written with the labels, read back for a replay.

A record names the plugin version, the bundle (its layout, the SHA-256 of each graph and weight
file as the embedding store computes them, :mod:`~napari_sam3_onnx.engine.store.bundle_digest`,
and the precision its manifest declares), the workflow (``"text"``, ``"propagate"``,
``"segment-all"``), its prompts (phrases; seeds with the plane each is on: clicks, boxes, masks)
and its settings (score floor, contrast window, slice axis, ...), and the planes it ran on.

Where it is kept, by output format (:func:`read_provenance` reads all of them):

* TIFF: the OME-XML ``Image/Description`` of the file (tifffile's ``metadata={"Description":
  ...}``), so it is inside the one file that is renamed into place;
* ``.zarr`` array, ``.ome.zarr`` or ``IMAGE/labels/NAME``: the attribute :data:`ATTR` of the
  array or labels group, written into the temporary folder before it is renamed;
* ``.npy``: a sidecar ``NAME.npy.provenance.json`` (:func:`sidecar`), written to a temporary
  name and renamed right after the labels.
"""

from __future__ import annotations

import datetime as _dt
import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..engine.interactive import Prompt
from ..engine.store.bundle_digest import bundle_digest, file_hashes
from ..engine.tracking.types import Seed
from .io import InputError

#: ``"format"`` of every record (a reader refuses any other).
FORMAT = "napari-sam3-onnx provenance"
#: Version of the record's layout.
VERSION = 1
#: Attribute name in zarr attributes.
ATTR = "napari-sam3-onnx-provenance"
#: Suffix of the sidecar beside a ``.npy`` output.
SIDECAR_SUFFIX = ".provenance.json"


@dataclass(frozen=True)
class BundleInfo:
    """The model that made the labels.

    Attributes
    ----------
    id : str
        Bundle id (its folder name).
    layout : str
        Adapter layout id.
    digest : str
        ``"sha256:<hex>"`` over every graph and weight file (as embedding stores key them).
    files : dict[str, str]
        ``file name -> sha256`` of those files.
    precision : str or None
        Weight precision the bundle's manifest declares (None: it declares none).
    """

    id: str
    layout: str
    digest: str
    files: dict[str, str]
    precision: str | None


@dataclass(frozen=True)
class Provenance:
    """One labels output's record (see the module notes); JSON with :meth:`to_json`.

    Attributes
    ----------
    workflow : str
        ``"text"``, ``"propagate"`` or ``"segment-all"``.
    bundle : BundleInfo
    image : dict
        ``{"path": str, "shape": [int, ...]}`` of the input image as read.
    prompts : dict
        Workflow prompts: ``{"concepts": [str]}``; ``{"seeds": {id: [seed, ...]}}`` with each
        seed ``{"plane": z, "points": [[row, col], ...], "labels": [1|0, ...], "box": [r0, c0,
        r1, c1] | None}`` or ``{"plane": z, "mask": rle}`` (:func:`mask_to_rle`); ``{}`` when
        the workflow takes none (automatic segmentation).
    settings : dict
        The workflow's options by name (JSON values).
    planes : list of list of int
        Indices (along the leading axes) of the planes the workflow ran on; empty: all of them.
    plugin_version : str
    created : str
        UTC time the record was made (ISO 8601).
    """

    workflow: str
    bundle: BundleInfo
    image: dict
    prompts: dict
    settings: dict
    planes: list = field(default_factory=list)
    plugin_version: str = __version__
    created: str = ""

    def to_dict(self) -> dict:
        """The record as plain JSON values, with ``format`` and ``version``."""
        return {"format": FORMAT, "version": VERSION, **asdict(self)}

    def to_json(self) -> str:
        """Compact ASCII JSON (TIFF descriptions are 7-bit)."""
        return json.dumps(self.to_dict(), ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        """Read a record made by :meth:`to_dict`.

        Raises
        ------
        InputError
            Not such a record, or one of a newer layout.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise InputError("not a napari-sam3-onnx provenance record")
        if int(data.get("version", 0)) > VERSION:
            raise InputError(f"provenance record version {data.get('version')} is newer than "
                             f"this plugin reads ({VERSION}); update napari-sam3-onnx.")
        try:
            return cls(workflow=str(data["workflow"]), bundle=BundleInfo(**data["bundle"]),
                       image=dict(data["image"]), prompts=dict(data["prompts"]),
                       settings=dict(data["settings"]), planes=list(data.get("planes", [])),
                       plugin_version=str(data.get("plugin_version", "")),
                       created=str(data.get("created", "")))
        except (KeyError, TypeError) as exc:
            raise InputError(f"damaged provenance record ({type(exc).__name__}: {exc})") from None


def bundle_info(folder: Path | str, layout: str, precision: str | None) -> BundleInfo:
    """The bundle in a record: file digests cached by the embedding store's hasher."""
    folder = Path(folder)
    return BundleInfo(folder.name, layout, bundle_digest(folder), dict(sorted(
        file_hashes(folder).items())), precision)


def make_record(workflow: str, bundle: BundleInfo, image: Path | str, shape: Sequence[int],
                prompts: Mapping, settings: Mapping,
                planes: Sequence[Sequence[int]] = ()) -> Provenance:
    """A :class:`Provenance` stamped with the plugin version and the current UTC time."""
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return Provenance(workflow, bundle, {"path": str(Path(image).resolve()),
                                         "shape": [int(s) for s in shape]},
                      json.loads(json.dumps(dict(prompts))), json.loads(json.dumps(dict(settings))),
                      [[int(i) for i in p] for p in planes], __version__, now)


def mask_to_rle(mask: np.ndarray) -> dict:
    """A bool ``(rows, cols)`` mask as run lengths in C order, starting with a run of False."""
    flat = np.asarray(mask, bool).ravel()
    edges = np.flatnonzero(np.diff(flat.astype(np.int8))) + 1
    bounds = np.concatenate([[0], edges, [flat.size]])
    counts = np.diff(bounds).tolist()
    if flat.size and flat[0]:
        counts = [0, *counts]
    return {"shape": [int(s) for s in mask.shape], "counts": [int(c) for c in counts]}


def rle_to_mask(rle: Mapping) -> np.ndarray:
    """The inverse of :func:`mask_to_rle`."""
    shape = tuple(int(s) for s in rle["shape"])
    counts = [int(c) for c in rle["counts"]]
    values = np.arange(len(counts)) % 2 == 1
    flat = np.repeat(values, counts)
    if flat.size != int(np.prod(shape)):
        raise InputError(f"provenance mask runs cover {flat.size} pixels, not {shape}")
    return flat.reshape(shape)


def seeds_to_json(seeds: Mapping[int, Sequence[Seed]]) -> dict:
    """Propagation seeds per object id as JSON (see :attr:`Provenance.prompts`)."""
    out: dict[str, list] = {}
    for oid, items in seeds.items():
        rows = []
        for seed in items:
            if seed.mask is not None:
                rows.append({"plane": int(seed.index), "mask": mask_to_rle(seed.mask)})
                continue
            p = seed.prompt
            assert p is not None
            box = None if p.box_rc is None else [float(v) for v in np.ravel(p.box_rc)]
            rows.append({"plane": int(seed.index),
                         "points": np.asarray(p.points_rc, float).reshape(-1, 2).tolist(),
                         "labels": [int(v) for v in np.ravel(p.labels)], "box": box})
        out[str(int(oid))] = rows
    return out


def seeds_from_json(data: Mapping) -> dict[int, list[Seed]]:
    """The inverse of :func:`seeds_to_json`."""
    seeds: dict[int, list[Seed]] = {}
    for oid, rows in data.items():
        seeds[int(oid)] = [
            Seed.from_mask(int(r["plane"]), rle_to_mask(r["mask"])) if "mask" in r
            else Seed(int(r["plane"]), prompt=Prompt.clicks(
                np.asarray(r["points"], float).reshape(-1, 2), np.asarray(r["labels"], int),
                None if r.get("box") is None else tuple(r["box"])))
            for r in rows]
    return seeds


def sidecar(path: Path) -> Path:
    """The sidecar JSON of a ``.npy`` output."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _zarr_attrs(path: Path) -> dict:
    import zarr

    try:
        return dict(zarr.open(str(path), mode="r").attrs.asdict())
    except Exception as exc:
        raise InputError(f"Cannot read the attributes of {path} ({type(exc).__name__}: "
                         f"{exc}).") from exc


def _tiff_description(path: Path) -> str | None:
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            xml = tif.ome_metadata
            shaped = tif.shaped_metadata or ()
    except Exception as exc:
        raise InputError(f"Cannot read {path} as a TIFF ({type(exc).__name__}: {exc}).") from exc
    if not xml:  # a stack with a length-1 axis is written with tifffile's shaped description
        return next((str(m["Description"]) for m in shaped
                     if isinstance(m, dict) and "Description" in m), None)
    root = ET.fromstring(xml)
    ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
    node = root.find(f"{ns}Image/{ns}Description")
    return None if node is None else node.text


def read_provenance(path: Path | str) -> Provenance:
    """The record written with a labels output (TIFF, ``.npy`` + sidecar, zarr, OME-Zarr).

    Raises
    ------
    InputError
        The output does not exist, or records no provenance (written by another program or
        an older version of this plugin).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist.")
    name = path.name.lower()
    text: str | None = None
    data: Any = None
    if name.endswith((".tif", ".tiff")):
        text = _tiff_description(path)
    elif name.endswith(".npy"):
        side = sidecar(path)
        text = side.read_text(encoding="utf-8") if side.is_file() else None
    elif path.is_dir():
        data = _zarr_attrs(path).get(ATTR)
    try:
        if text is not None:
            data = json.loads(text)
        return Provenance.from_dict(data)
    except (ValueError, InputError):
        raise InputError(f"{path} records no provenance (it was not written by this plugin's "
                         "labels outputs, or by an older version).") from None
