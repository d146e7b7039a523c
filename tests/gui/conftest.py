"""Fixtures for the widget tests: the widget opened the way napari opens it, a toy model loaded.

``viewer.window.add_plugin_dock_widget`` goes through the plugin's manifest (found through its
entry point; with ``PYTHONPATH=src`` the checkout's ``napari.yaml``), and napari hands the widget
a wrapped viewer whose layers are wrapped too (``PublicOnlyProxy``) - as users get it.
"""

from __future__ import annotations

import pytest

PLUGIN = "napari-sam3-onnx"


def dock_widget_name() -> str:
    """The display name of the plugin's (first) dock widget in its manifest."""
    from npe2 import PluginManager

    manager = PluginManager.instance()
    manager.discover()
    return manager.get_manifest(PLUGIN).contributions.widgets[0].display_name


def open_plugin_widget(viewer):
    """Dock the plugin's widget from its manifest; returns ``(dock, widget)``."""
    return viewer.window.add_plugin_dock_widget(PLUGIN, dock_widget_name())


@pytest.fixture
def open_widget():
    """``open_widget(viewer) -> widget``, docked through the plugin manifest."""
    return lambda viewer: open_plugin_widget(viewer)[1]


@pytest.fixture
def make_widget(make_napari_viewer, hf_bundle):
    """``make_widget(data, **image_kwargs) -> (viewer, image_layer, widget)``."""

    def factory(data, **kwargs):
        viewer = make_napari_viewer()
        image = viewer.add_image(data, **kwargs)
        _dock, widget = open_plugin_widget(viewer)
        widget.load_bundle(hf_bundle, toy=True)
        return viewer, image, widget

    return factory
