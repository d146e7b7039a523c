"""What a closed SAM 3 dock leaves for the next one opened on the same viewer: its workspace.

napari builds a new widget each time the dock is opened again (its close button, or
``remove_dock_widget`` then ``add_plugin_dock_widget``), so a workspace owned by the widget
alone would drop the loaded model with the dock. :class:`KeptPerViewer` maps each viewer,
weakly (a closed viewer frees its entry), to a :class:`Kept`; the menu entries
(:mod:`.docks`) hold one and hand the viewer's to the widget. A test builds its own.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from napari_sam3_onnx.api.workspace import Workspace


@dataclass
class Kept:
    """One viewer's dock state that outlives the dock.

    Attributes
    ----------
    workspace : Workspace
        The model, encoder and caches every tab shares.
    toy : bool
        The model is the toy (the Model field and info line say so).
    device : str
        The Device choice the model was opened with ("" until a model is loaded).
    store_write : bool
        The Embeddings row's "add new embeddings" choice for the attached store.
    """

    workspace: Workspace = field(default_factory=Workspace)
    toy: bool = False
    device: str = ""
    store_write: bool = False


class KeptPerViewer:
    """A :class:`Kept` per viewer, held weakly on the viewer."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[Any, Kept] = weakref.WeakKeyDictionary()

    def get(self, viewer: Any) -> Kept:
        """The viewer's :class:`Kept` (a new one the first time); a napari proxy counts as it."""
        return self._kept.setdefault(getattr(viewer, "__wrapped__", viewer), Kept())


def restore(kept: Kept, panel: Any) -> None:
    """Show ``kept``'s model and store in a new dock's model ``panel`` (none loaded: nothing)."""
    if kept.workspace.adapter is None or kept.workspace.folder is None:
        return
    if kept.workspace.store is not None:  # attached already: shown, not checked again
        panel.store.show_attached(kept.workspace.store, kept.store_write)
    if kept.device:
        panel.device.blockSignals(True)  # choosing it must not reopen the bundle
        panel.device.setCurrentText(kept.device)
        panel.device.blockSignals(False)
    panel.show_kept(kept.toy)


def remember(kept: Kept, panel: Any) -> None:
    """Record the model ``panel`` shows now (after every load attempt)."""
    kept.toy = bool(panel.toy) and panel.adapter is not None
    kept.device = panel.device.currentText() if panel.adapter is not None else ""
    kept.store_write = panel.store.write.isChecked()
