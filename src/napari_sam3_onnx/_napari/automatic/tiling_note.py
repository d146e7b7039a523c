"""What the Automatic tab says about the dock's "Tile large planes" switch (above the tabs).

The switch sets the workspace's tiling (:class:`~napari_sam3_onnx.engine.tiling.tiles.TileSettings`
or None); the runs follow it, and the tab says whether a plane is cut into tiles and into how many,
so a run that takes six encodes per plane (or a switch that changes nothing on small planes) is
never a surprise.
"""

from __future__ import annotations

from collections.abc import Sequence

from napari_sam3_onnx._napari.tiling_switch import TILE_PLACE, TILE_TEXT
from napari_sam3_onnx.api.automatic import tiles_per_plane
from napari_sam3_onnx.engine.tiling.tiled import input_side
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.base import SamAdapter


def tiling_note(adapter: SamAdapter, plane_shape: Sequence[int], tiling: TileSettings | None,
                where: str = "per plane") -> str:
    """``"tiled: 6 tiles per plane"``, why a plane is not tiled, or "" (nothing to say).

    With the switch off, planes the default tiling would cut get a hint where the switch is
    (a 4096 x 3000 plane squeezed into one model input loses its small objects); small
    planes get no note.

    Parameters
    ----------
    adapter : SamAdapter
        The model (its input side sets the tile side and the threshold).
    plane_shape : sequence of int
        ``(rows, cols)`` of the planes to segment.
    tiling : TileSettings or None
        The workspace's tiling (None: the switch is off).
    where : str
        Which planes are tiled ("per plane", or "on the key slice" in the tracked mode).
    """
    if tiling is None:
        would = tiles_per_plane(adapter, plane_shape, TileSettings())
        return "" if would == 1 else (f"untiled: '{TILE_TEXT}' {TILE_PLACE} "
                                      f"would cut each plane into {would} tiles")
    tiles = tiles_per_plane(adapter, plane_shape, tiling)
    if tiles > 1:
        return f"tiled: {tiles} tiles {where}"
    rows, cols = (int(v) for v in plane_shape[:2])
    return (f"not tiled: {rows} x {cols} px planes are within the tiling threshold, "
            f"{tiling.threshold_px(input_side(adapter))} px")


def bracketed(note: str) -> str:
    """``" (note)"`` to put into a message, "" for no note."""
    return f" ({note})" if note else ""
