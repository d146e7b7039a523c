"""Large planes in the Clicks tab: encode what the viewer shows, or tiles of the plane.

*Field of view*: the canvas rectangle is mapped to the image's data coordinates (camera centre
and zoom, through ``layer.world_to_data``), clipped to the plane and snapped outwards
(:func:`~napari_sam3_onnx.engine.tiling.tiles.fov_region`) so small pans keep the same
rectangle, and reused while it still contains the view
(:func:`~napari_sam3_onnx.engine.tiling.tiles.fov_reusable`).
That rectangle is encoded, at most once (it is part of the cache key), instead of the plane.

*Tiles*: prompts on planes above the tiling threshold are answered on one tile each
(:mod:`napari_sam3_onnx.engine.tiling.tiled`) when the dock's "Tile large planes" switch is on
(:mod:`napari_sam3_onnx._napari.tiling_switch`; it is every tab's, so it is not here). When both
are on, the field of view wins.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from napari.layers import Image
from qtpy.QtWidgets import QCheckBox

from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tiling.tiled import prompt_extent
from napari_sam3_onnx.engine.tiling.tiles import Box, TileSettings, fov_region, fov_reusable

FOV_TEXT = "Encode what I see (field of view)"


def canvas_size(viewer) -> tuple[float, float]:
    """``(height, width)`` of the canvas (one view box in grid mode) in screen pixels."""
    canvas = getattr(viewer, "canvas", None)
    if canvas is not None and hasattr(canvas, "viewbox_size"):
        return tuple(float(v) for v in canvas.viewbox_size(viewer.layers))  # type: ignore
    if canvas is not None and hasattr(canvas, "size"):
        return tuple(float(v) for v in canvas.size)  # type: ignore[return-value]
    return tuple(float(v) for v in viewer._canvas_size)  # type: ignore[return-value]


def camera(viewer):
    """The viewer's camera (``viewer.scene.camera`` from napari 0.9, ``viewer.camera`` before)."""
    scene = getattr(viewer, "scene", None)
    return scene.camera if scene is not None and hasattr(scene, "camera") else viewer.camera


def visible_rect(viewer, image: Image) -> tuple[float, float, float, float]:
    """``(r0, c0, r1, c1)`` of the canvas in the image's data coordinates (row, col).

    The four canvas corners go through ``image.world_to_data``, so scale, translate and rotation
    are honoured; the result is their bounding box and may reach beyond the image.
    """
    height, width = canvas_size(viewer)
    cam = camera(viewer)
    zoom = float(cam.zoom)
    cy, cx = (float(v) for v in cam.center[-2:])
    hh, hw = height / zoom / 2, width / zoom / 2
    point = np.asarray(viewer.dims.point, dtype=np.float64)
    corners = []
    for dy in (-hh, hh):
        for dx in (-hw, hw):
            p = point.copy()
            p[-2], p[-1] = cy + dy, cx + dx
            corners.append(np.asarray(image.world_to_data(p), np.float64)[-2:])
    rc = np.array(corners)
    lo, hi = rc.min(axis=0), rc.max(axis=0)
    return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])


def _grow(box: Box, extent) -> Box:
    """``box`` grown to hold a pixel-centre extent ``(r0, c0, r1, c1)``."""
    return (min(box[0], math.floor(extent[0])), min(box[1], math.floor(extent[1])),
            max(box[2], math.floor(extent[2]) + 1), max(box[3], math.floor(extent[3]) + 1))


class ViewMode:
    """How the Clicks tab encodes: the plane, the field of view, or tiles.

    Attributes
    ----------
    fov : bool
        Encode the field of view.
    tiling : TileSettings or None
        Tile large planes (None: never); the workspace's setting, so every tab tiles alike.
    regions : dict
        The last field-of-view box per (image, plane); reused while the view stays in it.
    """

    def __init__(self, workspace: Workspace | None = None) -> None:
        self.fov = False
        self.workspace = workspace if workspace is not None else Workspace()
        self.regions: dict[tuple, Box] = {}

    @property
    def tiling(self) -> TileSettings | None:
        """The workspace's tiling setting."""
        return self.workspace.tiling

    @tiling.setter
    def tiling(self, value: TileSettings | None) -> None:
        self.workspace.tiling = value

    def region(self, viewer, image: Image, ref: SliceRef, prompts: list[Prompt]) -> Box | None:
        """The box to encode for this view and these prompts; None for the whole plane."""
        shape = ref.plane_shape
        rect = visible_rect(viewer, image)
        seen, box = fov_region(rect, shape, step=1, pad=0), fov_region(rect, shape)
        if seen is None or box is None:
            return None
        for prompt in prompts:  # prompts placed before a pan must stay answerable
            ext = prompt_extent(prompt, shape)
            if ext is not None:
                seen, box = (_grow(b, ext) for b in (seen, box))
        key = (ref.source, tuple(ref.index))
        previous = self.regions.get(key)
        if fov_reusable(previous, seen):
            box = previous
        self.regions[key] = box  # type: ignore[assignment]
        return None if box == (0, 0, *shape) else box

    def ref(self, viewer, image: Image, ref: SliceRef, prompts: list[Prompt]) -> SliceRef:
        """``ref`` restricted to the field of view when that mode is on."""
        if not self.fov:
            return ref
        return replace(ref, region=self.region(viewer, image, ref, prompts))


def make_fov_control(session) -> QCheckBox:
    """The Clicks tab's field-of-view check box (off), wired to ``session.view``."""
    fov = QCheckBox(FOV_TEXT)
    fov.setToolTip("Encode only the part of the plane on screen, at its own scale: small objects "
                   "in a large image get the model's full resolution. The embedding is reused "
                   "while the view stays put; pan or zoom further and the next prompt encodes "
                   "the new view. Wins over 'Tile large planes' when both are on.")

    def set_fov(on: bool) -> None:
        session.view.fov = bool(on)
        session.schedule()

    fov.toggled.connect(set_fov)
    return fov
