"""The plugin's menu entries: one per workflow, each opening the one SAM 3 dock on its tab.

napari gives every ``widgets`` entry of ``napari.yaml`` its own dock. So that "Text search"
does not build a second widget (with its own prompt layers and cache) beside the one opened
by "SAM 3", an entry finds the widget already docked in this viewer, takes it out of its dock and
hands it back to napari, which docks it under the entry's name; a new widget is built only when
there is none, on the viewer's workspace kept from a dock closed earlier (:mod:`.kept`). The
entries are classes because napari passes the viewer to a class whose ``__init__`` names
``napari_viewer``; calling one (their metaclass's ``__call__``) returns the widget itself,
typed as such.

napari titles a dock after the entry that opened it, but every entry opens the whole dock, so
:class:`_WholeDockTitle` gives each dock the first entry's title ("SAM 3 (napari-sam3-onnx)"),
also when napari redraws the title bar (floating, docking again). napari's own name for the dock
(its key in ``viewer.window.dock_widgets``) stays the entry's, so each entry still finds its dock.
"""

from __future__ import annotations

from typing import Any

from napari.plugins import menu_item_template
from qtpy.QtCore import QEvent, QObject
from qtpy.QtWidgets import QDockWidget

from napari_sam3_onnx._napari.kept import KeptPerViewer
from napari_sam3_onnx._napari.widget import SamDock

PLUGIN = "napari-sam3-onnx"
#: The first menu entry in napari.yaml: the dock is titled after it, whichever entry opened it.
FIRST_ENTRY = "SAM 3"
DOCK_TITLE = menu_item_template.format(PLUGIN, FIRST_ENTRY)


class _WholeDockTitle(QObject):
    """Retitles every dock napari wraps ``widget`` in as :data:`DOCK_TITLE`.

    The widget is wrapped (a parent change) before napari draws the dock's title bar, and the
    dock is placed in the window (the dock's parent change) after; the title is set then, and
    again whenever the dock floats, docks or moves to another side (napari then draws a new
    title bar from its own name for the dock).
    """

    def __init__(self, widget: SamDock) -> None:
        super().__init__(widget)
        self._widget = widget
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        """Follow the widget into its dock, and the dock into the window."""
        if event.type() == QEvent.Type.ParentChange:
            dock = self._widget.parent()
            if obj is self._widget and isinstance(dock, QDockWidget):
                dock.installEventFilter(self)
                # connected after napari's own slots, which draw a new bar: so they run after
                dock.topLevelChanged.connect(lambda _floating, d=dock: self.retitle(d))
                dock.dockLocationChanged.connect(lambda _area, d=dock: self.retitle(d))
            elif obj is dock:
                self.retitle(dock)
        return False

    @staticmethod
    def retitle(dock: QDockWidget) -> None:
        """Title ``dock`` and its title bar (napari's label ``title``, if it has one)."""
        dock.setWindowTitle(DOCK_TITLE)
        label = getattr(dock.titleBarWidget(), "title", None)
        if label is not None and hasattr(label, "setText"):
            label.setText(DOCK_TITLE)


def open_on_tab(napari_viewer, tab: str, kept: KeptPerViewer) -> SamDock:
    """The viewer's SAM 3 widget, out of any dock, on ``tab`` (built on ``kept``'s if none)."""
    widget = next((w for w in napari_viewer.window.dock_widgets.values()
                   if isinstance(w, SamDock)), None)
    if widget is None:
        widget = SamDock(napari_viewer, kept=kept.get(napari_viewer))
        _WholeDockTitle(widget)
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
