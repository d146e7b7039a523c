"""The workflow tabs docked under the model panel, after "Clicks & boxes".

Each entry is ``(tab title, factory)``; the factory gets the main widget (``host``) and returns a
QWidget. What every workflow shares is the typed workspace, ``host.model.workspace``
(:class:`~napari_sam3_onnx.api.workspace.Workspace`: the model, the one encoder on the one
embedding cache, the language cache, tiling and data versions), which a tab keeps as its own
``workspace``; through ``host`` (typed as :class:`~.host.DockHost`, what a tab may read of the dock)
it also reaches ``host.viewer``, ``host.session`` (the annotated ``image`` and its prompt
``layers``), the dock's one status line and ``host.notify`` / ``host.inform`` for messages.
Panels import lazily so a missing optional part never breaks the main widget.
"""

from __future__ import annotations

from qtpy.QtWidgets import QWidget

#: The host protocol lives in :mod:`.host` (what the tabs import); these stay importable here.
from napari_sam3_onnx._napari.host import DockHost, PanelFactory, follow_dock

__all__ = ["DockHost", "PanelFactory", "extra_panels", "follow_dock"]


def _text(host: DockHost) -> QWidget:
    from napari_sam3_onnx._napari.text.panel import TextPanel

    return TextPanel(host)


def _propagate(host: DockHost) -> QWidget:
    from napari_sam3_onnx._napari.propagate.panel import PropagationPanel

    return PropagationPanel(host)


def _automatic(host: DockHost) -> QWidget:
    from napari_sam3_onnx._napari.automatic.panel import AutoPanel

    return AutoPanel(host)


def _like_these(host: DockHost) -> QWidget:
    from napari_sam3_onnx._napari.exemplars_panel import ExemplarPanel

    return ExemplarPanel(host)


def extra_panels() -> list[tuple[str, PanelFactory]]:
    """The workflow tabs, in order."""
    return [
        ("Text", _text),
        ("Propagate", _propagate),
        ("Automatic", _automatic),
        ("Like these", _like_these),
    ]
