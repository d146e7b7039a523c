"""The Automatic tab's per-plane mode honours the dock's one "Tile large planes" switch.

The bundle is the sloped toy tracker at the smallest test geometry (84-px input), so the
default tiling threshold (2 x input = 168 px) is passed by a 190 x 130 plane, tiled into six
84-px tiles; its 3-px blobs are squeezed below the decoder's resolution on the whole plane, so
the tiled and untiled labels differ and a tab that ignored the switch fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

from .conftest import open_plugin_widget

pytestmark = pytest.mark.gui

GEOM = TestGeometry(grid=6)  # 84-px input: tiled above 168 px, six tiles on SHAPE
SHAPE = (190, 130)  # (rows, cols), long side just above the threshold
SMALL = (150, 110)  # below it: tiling on changes nothing
WINDOW = (0.0, 255.0)
POINTS = 8
BLOBS = ((22, 25, 3), (40, 100, 3), (95, 60, 3), (150, 20, 3), (170, 105, 3), (120, 110, 5))


def stack(shape=SHAPE):
    """Two planes of small blobs, the second shifted (asymmetric, non-square)."""
    return np.stack([blob_image(shape, [(r + 3 * z, c + 2 * z, rad) for r, c, rad in BLOBS
                                        if r + 6 < shape[0] and c + 6 < shape[1]], value=255)
                     for z in range(2)])


@pytest.fixture(scope="module")
def small_tracker(tmp_path_factory):
    return build_sloped_tracker(tmp_path_factory.mktemp("small_tracker"), GEOM)


def run_tab(make_napari_viewer, qtbot, data, bundle, tiled: bool):
    """Open the dock as napari does, set the switch, preview every slice; the preview labels."""
    from napari_sam3_onnx._napari.automatic.output import PREVIEW

    viewer = make_napari_viewer()
    viewer.add_image(data, contrast_limits=WINDOW)
    _dock, widget = open_plugin_widget(viewer)
    widget.load_bundle(bundle, toy=True)
    widget.tile.setChecked(tiled)
    panel = widget.panels["Automatic"]
    widget.tabs.setCurrentWidget(panel)
    assert not panel.mode.tracked  # the per-plane mode
    panel.settings.points_per_side.setValue(POINTS)
    panel.scope.set_mode("all")
    calls = widget.session.encoder.encoder_calls
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    encoded = widget.session.encoder.encoder_calls - calls
    return np.asarray(viewer.layers[PREVIEW].data), panel, encoded


def api_labels(bundle, data, panel, tile):
    return api.segment_all(api.open_bundle(bundle), data, settings=panel.settings.settings(),
                           window=WINDOW, tile=tile).labels


def test_per_plane_mode_tiles_large_planes_as_the_api_does(make_napari_viewer, small_tracker,
                                                           qtbot):
    data = stack()
    got, panel, encoded = run_tab(make_napari_viewer, qtbot, data, small_tracker, tiled=True)
    tiled = api_labels(small_tracker, data, panel, TileSettings())  # the switch's settings
    untiled = api_labels(small_tracker, data, panel, None)
    assert not np.array_equal(tiled, untiled)  # tiling matters on this plane
    np.testing.assert_array_equal(got, tiled)  # the tab ran the API's tiled loop
    # on this plane the same tiles as the command line's --tile <input side> (84 px)
    np.testing.assert_array_equal(got, api_labels(small_tracker, data, panel, 84))
    assert encoded == 2 * 6  # six tiles per plane, each encoded once, never the whole plane
    assert any("tiled: 6 tiles per plane" in m for m in panel.messages[:-1])  # when it starts
    assert "tiled: 6 tiles per plane" in panel.messages[-1]  # and when it ends


def test_per_plane_mode_untiled_when_the_switch_is_off(make_napari_viewer, small_tracker, qtbot):
    data = stack()
    got, panel, encoded = run_tab(make_napari_viewer, qtbot, data, small_tracker, tiled=False)
    np.testing.assert_array_equal(got, api_labels(small_tracker, data, panel, None))
    assert encoded == 2  # each whole plane once
    assert "tiles per plane" not in " ".join(panel.messages)
    # the plane is large for the model: the tab says where the switch is
    assert "'Tile large planes' at the top of the dock would cut each plane into 6 tiles" \
        in panel.messages[-1]


def test_planes_below_the_threshold_are_not_tiled(make_napari_viewer, small_tracker, qtbot):
    data = stack(SMALL)
    got, panel, encoded = run_tab(make_napari_viewer, qtbot, data, small_tracker, tiled=True)
    np.testing.assert_array_equal(got, api_labels(small_tracker, data, panel, None))
    assert encoded == 2
    assert "not tiled" in panel.messages[-1] and "168 px" in panel.messages[-1]


def test_small_planes_untiled_get_no_tiling_note(make_napari_viewer, small_tracker, qtbot):
    _got, panel, _encoded = run_tab(make_napari_viewer, qtbot, stack(SMALL), small_tracker,
                                    tiled=False)
    assert not any("tile" in m for m in panel.messages)


def test_tracked_mode_tiles_its_key_slice_and_says_so(make_napari_viewer, small_tracker, qtbot):
    from napari_sam3_onnx._napari.automatic.output import PREVIEW
    from napari_sam3_onnx.api.automatic_tracked import segment_all_tracked

    data = stack()
    viewer = make_napari_viewer()
    viewer.add_image(data, contrast_limits=WINDOW)
    _dock, widget = open_plugin_widget(viewer)
    widget.load_bundle(small_tracker, toy=True)
    widget.tile.setChecked(True)
    panel = widget.panels["Automatic"]
    panel.settings.points_per_side.setValue(POINTS)
    panel.mode.set_tracked(True)
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    ref = segment_all_tracked(api.open_bundle(small_tracker), data, key=0,
                              settings=panel.settings.settings(), window=WINDOW,
                              tile=TileSettings())
    np.testing.assert_array_equal(viewer.layers[PREVIEW].data, ref.labels)
    assert "tiled: 6 tiles on the key slice" in panel.messages[-2]  # the start message
