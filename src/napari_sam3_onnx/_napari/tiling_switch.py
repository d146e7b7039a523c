"""The dock's "Tile large planes" switch: the workspace's one tiling setting, for every tab.

The switch sets :attr:`Workspace.tiling <napari_sam3_onnx.api.workspace.Workspace>` to the
default :class:`~napari_sam3_onnx.engine.tiling.tiles.TileSettings` (on) or None (off). The
Clicks & boxes tab answers prompts on a tile, the Text tab searches tile by tile and the
Automatic tab segments tile by tile, all from that one value; so the switch sits in the dock,
above the tabs, where each of them can see it. Propagation always encodes whole planes.
"""

from __future__ import annotations

from collections.abc import Callable

from qtpy.QtWidgets import QCheckBox

from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.tiling.tiled import input_side
from napari_sam3_onnx.engine.tiling.tiles import THRESHOLD_INPUTS, TileSettings
from napari_sam3_onnx.models.base import SamAdapter

TILE_TEXT = "Tile large planes"
#: Where the switch is, for messages on the tabs that follow it.
TILE_PLACE = "at the top of the dock"
#: SAM 3's input side in pixels, only to put a number into the tooltip before a model is loaded.
SAM3_INPUT = 1008


def tile_tooltip(adapter: SamAdapter | None = None) -> str:
    """What the switch does and from which plane size, for ``adapter`` (None: no model yet)."""
    default = TileSettings()
    sam3 = f"{default.threshold_px(SAM3_INPUT)} px for SAM 3"
    if adapter is None:
        where = sam3
    else:
        where = f"{default.threshold_px(input_side(adapter))} px for the model loaded; {sam3}"
    return (f"One setting for the Clicks & boxes, Text and Automatic tabs. Planes whose long "
            f"side exceeds {THRESHOLD_INPUTS:g} x the model input ({where}) are worked on "
            "model-sized tiles with a quarter overlap instead of being squeezed into one "
            "input, so small objects keep their size: a click or box is answered on a tile "
            "around it, text search and automatic segmentation encode every tile and join "
            "objects found twice. Smaller planes are never tiled. Propagation always encodes "
            "whole planes; in the Clicks & boxes tab 'Encode what I see' wins when both are on.")


def tile_switch(workspace: Workspace, changed: Callable[[], None]) -> QCheckBox:
    """The check box, wired to ``workspace.tiling``; ``changed()`` after each toggle.

    It starts as the workspace's tiling is (off for a new workspace).

    Parameters
    ----------
    workspace : Workspace
        The dock's one workspace, which every tab reads its tiling from.
    changed : callable
        Called after the setting changed (the Clicks tab runs its prompts again).
    """
    switch = QCheckBox(TILE_TEXT)
    switch.setToolTip(tile_tooltip(workspace.adapter))
    switch.setChecked(workspace.tiling is not None)

    def set_tiling(on: bool) -> None:
        workspace.tiling = TileSettings() if on else None
        changed()

    switch.toggled.connect(set_tiling)
    return switch
