"""The provenance of a labels layer saved from the dock: its live commit log as one record.

The record (:mod:`~napari_sam3_onnx.api.provenance`, workflow ``"dock"``) names the bundle of
the commits (file digests, layout, precision), the image (its file when it was read from one,
its shape) and, as ``prompts["commits"]``, the entries of the commits still in the layer, in
order (undone ones left out, :func:`~napari_sam3_onnx._napari.commit_log.live_entries`).
``napari-sam3-onnx replay`` runs them again (:mod:`~napari_sam3_onnx.api.dock_replay`).
"""

from __future__ import annotations

from pathlib import Path

from napari.layers import Labels

from napari_sam3_onnx._napari.commit_log import live_entries
from napari_sam3_onnx.api.dock_replay import DOCK
from napari_sam3_onnx.api.provenance import Provenance, bundle_info, make_record


def layer_record(layer: Labels) -> Provenance | None:
    """The layer's record (None: nothing of it was committed through the dock)."""
    commits = live_entries(layer)
    if not commits:
        return None
    bundles = {tuple(sorted((c.get("bundle") or {}).items())) for c in commits}
    last = commits[-1]
    bundle = last.get("bundle") or {}
    if not bundle.get("folder"):
        return None
    info = bundle_info(Path(bundle["folder"]), str(bundle.get("layout")), bundle.get("precision"))
    image = last.get("image") or {}
    settings = {"layer": str(layer.name),
                "bundles": [dict(b) for b in bundles] if len(bundles) > 1 else []}
    record = make_record(DOCK, info, image.get("path") or ".", image.get("shape", ()),
                         {"commits": commits}, settings)
    if not image.get("path"):  # not read from a file: replay needs --image
        record.image["path"] = ""
    return record
