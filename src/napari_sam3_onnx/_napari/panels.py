"""The workflow tabs docked under the model panel, after "Clicks & boxes".

Each entry is ``(tab title, factory)``; the factory gets the main widget (``host``) and returns a
QWidget. What every workflow shares is the typed workspace, ``host.model.workspace``
(:class:`~napari_sam3_onnx.api.workspace.Workspace`: the model, the one encoder on the one
embedding cache, the language cache, tiling and data versions), which a tab keeps as its own
``workspace``; through ``host`` (typed as :class:`DockHost`, what a tab may read of the dock)
it also reaches ``host.viewer``, ``host.session`` (the annotated ``image`` and its prompt
``layers``), the dock's one status line and ``host.notify`` / ``host.inform`` for messages.
Panels import lazily so a missing optional part never breaks the main widget.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from qtpy.QtWidgets import QComboBox, QLabel, QTabWidget, QWidget

if TYPE_CHECKING:
    import napari

    from napari_sam3_onnx._napari.clicks.session import ClickSession
    from napari_sam3_onnx._napari.model.panel import ModelPanel


class DockHost(Protocol):
    """What a workflow tab reads of the dock it sits in (the main widget), and nothing more."""

    @property
    def viewer(self) -> napari.Viewer: ...
    @property
    def model(self) -> ModelPanel: ...  # its ``workspace`` is what tabs share
    @property
    def session(self) -> ClickSession: ...  # the annotated image, prompt layers
    @property
    def image(self) -> QComboBox: ...  # the image chooser at the top
    @property
    def status(self) -> QLabel: ...  # the dock's one status line
    @property
    def tabs(self) -> QTabWidget: ...

    def notify(self, message: str) -> None:
        """What the user must read: the dock's status line and a napari notification."""

    def inform(self, message: str) -> None:
        """Routine news: the status line and the viewer's status bar, no pop-up."""


PanelFactory = Callable[[DockHost], QWidget]


def follow_dock(
    tab: QWidget,
    host: DockHost,
    refresh: Callable[[], None],
    layers_changed: Callable[..., None],
    stop: Callable[[], None],
) -> None:
    """Keep a tab current with the dock and the viewer, and let go of both when it is destroyed.

    ``refresh`` runs when the model or the image changes, ``layers_changed`` when the viewer
    gains or loses a layer; once the tab is destroyed, ``stop`` ends its run (it must not need
    the destroyed tab) and the viewer's events are disconnected.
    """
    host.model.loaded.connect(refresh)
    host.image.currentIndexChanged.connect(lambda _i: refresh())
    events = host.viewer.layers.events
    hooks = [(events.inserted, layers_changed), (events.removed, layers_changed)]
    for emitter, callback in hooks:
        emitter.connect(callback)
    tab.destroyed.connect(partial(_teardown, stop, hooks))


def _teardown(stop: Callable[[], None], hooks, _obj=None) -> None:
    stop()
    for emitter, callback in hooks:
        emitter.disconnect(callback)


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
