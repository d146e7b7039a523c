"""Every menu entry opens the whole SAM 3 dock, so every dock has the whole dock's title."""

from __future__ import annotations

import pytest

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.widget import SamDock

pytestmark = pytest.mark.gui

ENTRIES = ("Text search", "Propagate", "Automatic segmentation")


def _shown_title(dock) -> str:
    """The text in the dock's title bar (napari's own bar, redrawn when it floats or docks)."""
    return dock.titleBarWidget().title.text()


def test_a_dock_opened_from_text_search_is_titled_as_the_first_entrys(make_napari_viewer):
    first_viewer = make_napari_viewer()
    first, _w = first_viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    viewer = make_napari_viewer()
    dock, w = viewer.window.add_plugin_dock_widget(PLUGIN, "Text search")
    assert isinstance(w, SamDock) and w.tabs.tabText(w.tabs.currentIndex()) == "Text"
    assert _shown_title(first).startswith("SAM 3")
    assert _shown_title(dock) == dock.windowTitle() == _shown_title(first)
    assert "Text search" not in _shown_title(dock)


@pytest.mark.parametrize("entry", ENTRIES)
def test_moving_the_dock_between_entries_keeps_the_whole_docks_title(make_napari_viewer, entry):
    viewer = make_napari_viewer()
    first, w = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    title = _shown_title(first)
    dock, again = viewer.window.add_plugin_dock_widget(PLUGIN, entry)
    assert again is w and dock is not first
    assert _shown_title(dock) == dock.windowTitle() == title


def test_the_title_survives_floating_and_docking_again(make_napari_viewer, qtbot):
    viewer = make_napari_viewer()
    first, _w = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    title = _shown_title(first)
    dock, _w = viewer.window.add_plugin_dock_widget(PLUGIN, "Propagate")
    dock.setFloating(True)  # napari draws a new title bar from its own name for the dock
    qtbot.waitUntil(lambda: dock.isFloating())
    assert _shown_title(dock) == title
    dock.setFloating(False)
    qtbot.waitUntil(lambda: not dock.isFloating())
    assert _shown_title(dock) == title
