"""The model section's Download menu: one entry per known bundle, the toy built on the spot."""

from __future__ import annotations

from collections.abc import Callable

from qtpy.QtWidgets import QMenu, QWidget


def download_menu(parent: QWidget, load_toy: Callable[[], None],
                  start_download: Callable[[object], None]) -> QMenu:
    """A menu of the registry's bundles (disabled entries say why they cannot be fetched).

    Parameters
    ----------
    parent : QWidget
        The menu's owner (the model section).
    load_toy : callable
        Called by the toy's entry: it is built here, nothing is downloaded.
    start_download : callable
        ``start_download(spec)`` for a downloadable bundle's entry.
    """
    menu = QMenu(parent)
    try:
        from napari_sam3_onnx.models.registry import KNOWN_BUNDLES
    except ImportError:
        act = menu.addAction("(model registry not available in this version)")
        if act is not None:
            act.setEnabled(False)
        return menu
    for spec in KNOWN_BUNDLES:
        if spec.builder:  # the toy: built here, nothing to download
            menu.addAction(spec.title, load_toy)
            menu.addSeparator()
            continue
        caps = set(spec.capabilities)
        usable = "clicks" in caps or "text" in caps
        act = menu.addAction(spec.title, lambda s=spec: start_download(s))
        if act is None:  # pragma: no cover - Qt returns the action it added
            continue
        act.setEnabled(bool(spec.downloadable and usable))
        if not usable:
            act.setToolTip("This bundle cannot answer clicks, boxes or text.")
        elif not spec.downloadable:
            act.setToolTip("Not all files are published; see the Models page.")
    return menu
