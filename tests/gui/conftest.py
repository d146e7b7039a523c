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


@pytest.fixture(autouse=True)
def encode_ahead_starts_off(monkeypatch):
    """Encode ahead starts off in widget tests (it is on by default where memory allows).

    Background encodes would make every test's encode counts depend on timing; the tests of
    encode ahead itself ask for :func:`encode_ahead_default` and get the real default.
    """
    from napari_sam3_onnx._napari.clicks import ahead

    real = ahead.default_on
    monkeypatch.setattr(ahead, "default_on", lambda: False)
    return real


@pytest.fixture
def encode_ahead_default(encode_ahead_starts_off, monkeypatch):
    """The real "encode ahead" default for the widgets this test opens."""
    from napari_sam3_onnx._napari.clicks import ahead

    monkeypatch.setattr(ahead, "default_on", encode_ahead_starts_off)


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
