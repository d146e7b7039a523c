"""Fixtures for the widget tests: a viewer with the widget docked and the toy bundle loaded."""

from __future__ import annotations

import pytest


@pytest.fixture
def make_widget(make_napari_viewer, hf_bundle):
    """``make_widget(data, **image_kwargs) -> (viewer, image_layer, widget)``."""

    from napari_sam3_onnx._napari.widget import ClicksWidget

    def factory(data, **kwargs):
        viewer = make_napari_viewer()
        image = viewer.add_image(data, **kwargs)
        widget = ClicksWidget(viewer)
        viewer.window.add_dock_widget(widget, name="Clicks and boxes")
        widget.load_bundle(hf_bundle, toy=True)
        return viewer, image, widget

    return factory
