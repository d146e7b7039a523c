"""The plugin's menu entries: one per workflow, each opening the one SAM 3 dock on its tab.

napari gives every ``widgets`` entry of ``napari.yaml`` its own dock. So that "Text search"
does not build a second widget (with its own prompt layers and cache) beside the one opened
by "SAM 3", an entry finds the widget already docked in this viewer, takes it out of its dock and
hands it back to napari, which docks it under the entry's name; a new widget is built only when
there is none, on the viewer's workspace kept from a dock closed earlier (:mod:`.kept`). The
entries are classes because napari passes the viewer to a class whose ``__init__`` names
``napari_viewer``; calling one (their metaclass's ``__call__``) returns the widget itself,
typed as such.
"""

from __future__ import annotations

from typing import Any

from napari_sam3_onnx._napari.kept import KeptPerViewer
from napari_sam3_onnx._napari.widget import SamDock


def open_on_tab(napari_viewer, tab: str, kept: KeptPerViewer) -> SamDock:
    """The viewer's SAM 3 widget, out of any dock, on ``tab`` (built on ``kept``'s if none)."""
    widget = next((w for w in napari_viewer.window.dock_widgets.values()
                   if isinstance(w, SamDock)), None)
    if widget is None:
        widget = SamDock(napari_viewer, kept=kept.get(napari_viewer))
    else:
        widget.moving = True  # leaving the old dock is not a close: keep the session
        napari_viewer.window.remove_dock_widget(widget)
    widget.show_tab(tab)
    return widget


class _OpensTheDock(type):
    """Metaclass of the menu entries: ``Entry(napari_viewer)`` is the one dock widget."""

    TAB: str
    #: Each viewer's workspace, kept while its dock is closed (the loaded model survives).
    KEPT = KeptPerViewer()

    def __call__(cls, napari_viewer: Any) -> SamDock:
        return open_on_tab(napari_viewer, cls.TAB, cls.KEPT)


class _Entry(metaclass=_OpensTheDock):
    TAB = ""

    def __init__(self, napari_viewer: Any) -> None:  # never called: the metaclass answers
        """Open the SAM 3 dock on this entry's tab (napari reads this signature)."""


class ClicksAndBoxes(_Entry):
    """Plugins > SAM 3 > SAM 3: the dock on its Clicks & boxes tab."""

    TAB = "Clicks & boxes"


class TextSearch(_Entry):
    """Plugins > SAM 3 > Text search."""

    TAB = "Text"


class Propagate(_Entry):
    """Plugins > SAM 3 > Propagate."""

    TAB = "Propagate"


class Automatic(_Entry):
    """Plugins > SAM 3 > Automatic segmentation."""

    TAB = "Automatic"
