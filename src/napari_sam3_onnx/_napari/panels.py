"""The workflow tabs docked under the model panel, after "Clicks & boxes".

Each entry is ``(tab title, factory)``; the factory gets the main widget (``host``) and returns a
QWidget. What every workflow shares is the typed workspace, ``host.model.workspace``
(:class:`~napari_sam3_onnx.api.workspace.Workspace`: the model, the one encoder on the one
embedding cache, the language cache, tiling and data versions), which a tab keeps as its own
``workspace``; through ``host`` it also reaches ``host.viewer``, ``host.session`` (the
annotated ``image`` and its prompt ``layers``) and ``host._notify`` for messages. Panels import
lazily so a missing optional part never breaks the main widget.
"""

from __future__ import annotations

from collections.abc import Callable

from qtpy.QtWidgets import QWidget

PanelFactory = Callable[[QWidget], QWidget]


def _text(host: QWidget) -> QWidget:
    from napari_sam3_onnx._napari.text.panel import TextPanel

    return TextPanel(host)


def _propagate(host: QWidget) -> QWidget:
    from napari_sam3_onnx._napari.propagate.panel import PropagationPanel

    return PropagationPanel(host)


def _automatic(host: QWidget) -> QWidget:
    from napari_sam3_onnx._napari.automatic.panel import AutoPanel

    return AutoPanel(host)


def extra_panels() -> list[tuple[str, PanelFactory]]:
    """The workflow tabs, in order."""
    return [
        ("Text", _text),
        ("Propagate", _propagate),
        ("Automatic", _automatic),
    ]
