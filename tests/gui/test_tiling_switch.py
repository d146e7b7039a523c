"""The dock's one "Tile large planes" switch: seen from every tab, one setting for every tab.

The switch sets the workspace's tiling, which the Clicks & boxes, Text and Automatic tabs all
follow; so it sits in the dock, above the tabs, where each of those tabs can see it.
"""

from __future__ import annotations

import pytest
from qtpy.QtCore import QPoint, Qt

from napari_sam3_onnx._napari.tiling_switch import TILE_TEXT
from napari_sam3_onnx.engine.tiling.tiled import input_side
from napari_sam3_onnx.engine.tiling.tiles import TileSettings

from .conftest import open_plugin_widget

pytestmark = pytest.mark.gui

TABS = ("Clicks & boxes", "Text", "Propagate", "Automatic")


def shown_dock(make_napari_viewer, qtbot):
    """The plugin's dock, opened the napari way in a shown window and laid out."""
    viewer = make_napari_viewer(show=True)
    _dock, widget = open_plugin_widget(viewer)
    qtbot.waitUntil(widget.isVisible, timeout=3000)
    return viewer, widget


@pytest.mark.parametrize("tab", ["Text", "Automatic", "Clicks & boxes", "Propagate"])
def test_the_switch_is_visible_whichever_tab_is_current(make_napari_viewer, qtbot, tab):
    _viewer, w = shown_dock(make_napari_viewer, qtbot)
    w.show_tab(tab)
    qtbot.wait(50)
    assert w.tabs.currentWidget().isVisible()  # the tab really is the one shown
    assert w.tile.text() == TILE_TEXT
    assert w.tile.isVisible(), f"'{TILE_TEXT}' is hidden while the {tab} tab is current"


def click(qtbot, box):
    """A user's click on the check box's indicator (its left end; the row may be wider)."""
    assert box.isVisible()
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))


def test_one_click_sets_the_tiling_of_every_tab(make_napari_viewer, qtbot):
    _viewer, w = shown_dock(make_napari_viewer, qtbot)
    text, automatic, propagate = (w.panels[t] for t in ("Text", "Automatic", "Propagate"))
    assert w.workspace.tiling is None and not w.tile.isChecked()
    w.show_tab("Text")  # switched on by a click while the Text tab is current
    click(qtbot, w.tile)
    assert w.tile.isChecked() and w.workspace.tiling == TileSettings()
    # one setting: every tab reads the same workspace, so each sees it on
    for workspace in (text.workspace, propagate.workspace, automatic.host.model.workspace):
        assert workspace is w.workspace
    assert w.session.view.tiling == TileSettings()  # the Clicks tab's prompts
    w.show_tab("Automatic")  # and off again from the Automatic tab
    click(qtbot, w.tile)
    assert not w.tile.isChecked()
    assert w.workspace.tiling is None and w.session.view.tiling is None


def test_the_tooltip_gives_the_threshold_of_the_model_loaded(make_napari_viewer, qtbot,
                                                             hf_bundle):
    _viewer, w = shown_dock(make_napari_viewer, qtbot)
    assert "2016 px for SAM 3" in w.tile.toolTip()  # no model yet: SAM 3's 2 x 1008 px
    w.load_bundle(hf_bundle, toy=True)
    side = input_side(w.workspace.adapter)
    threshold = TileSettings().threshold_px(side)
    assert threshold == 2 * side
    assert f"{threshold} px for the model loaded" in w.tile.toolTip()
    for tab in ("Clicks & boxes", "Text", "Automatic"):
        assert tab in w.tile.toolTip()
