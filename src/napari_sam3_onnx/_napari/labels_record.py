"""The provenance of a labels layer saved from the dock: its live commit log as one record.

The record (:mod:`~napari_sam3_onnx.api.provenance`, workflow ``"dock"``) names the bundle of
the commits (file digests, layout, precision), the image (its file when it was read from one,
its shape) and, as ``prompts["commits"]``, the entries of the commits still in the layer, in
order (undone ones left out, :func:`~napari_sam3_onnx._napari.commit_log.live_entries`).
A layer with none records that it has no replayable step.
``napari-sam3-onnx replay`` runs them again (:mod:`~napari_sam3_onnx.api.dock_replay`).
"""

from __future__ import annotations

from pathlib import Path

from napari.layers import Labels

from napari_sam3_onnx._napari.commit_log import held_before, live_entries
from napari_sam3_onnx.api.dock_replay import DOCK, NOTHING
from napari_sam3_onnx.api.provenance import BundleInfo, Provenance, bundle_info, make_record

#: The bundle of a record of a layer no dock commit made.
NO_BUNDLE = BundleInfo("", "", "", {}, None)


def layer_record(layer: Labels) -> Provenance | None:
    """The layer's record (None: its commits name no bundle folder).

    A layer with no live commit (painted, opened, every commit undone) gets a record that
    says so: no commits, ``settings["replayable"]`` False and the reason in
    ``settings["note"]``; ``replay`` refuses it with that message. A layer that held labels
    under its first commit (painted, opened) records how many pixels
    (``settings["held_before_commits"]``; None: not known): a replay gives the commits alone.
    """
    commits = live_entries(layer)
    if not commits:
        data = layer.data[0] if layer.multiscale else layer.data
        record = make_record(DOCK, NO_BUNDLE, ".", data.shape, {"commits": []},
                             {"layer": str(layer.name), "bundles": [], "replayable": False,
                              "note": NOTHING})
        record.image["path"] = ""
        return record
    bundles = {tuple(sorted((c.get("bundle") or {}).items())) for c in commits}
    last = commits[-1]
    bundle = last.get("bundle") or {}
    if not bundle.get("folder"):
        return None
    info = bundle_info(Path(bundle["folder"]), str(bundle.get("layout")), bundle.get("precision"))
    image = last.get("image") or {}
    settings = {"layer": str(layer.name),
                "bundles": [dict(b) for b in bundles] if len(bundles) > 1 else [],
                "replayable": True, "held_before_commits": held_before(layer)}
    record = make_record(DOCK, info, image.get("path") or ".", image.get("shape", ()),
                         {"commits": commits}, settings)
    if not image.get("path"):  # not read from a file: replay needs --image
        record.image["path"] = ""
    return record
