"""Field-of-view and tiled encoding in the Clicks tab, with the toy tracker-pair bundle.

The toy model's input is 84 px: a 400 x 600 plane is squeezed ~5-7x and its 9-px blobs vanish.
Zoomed in to ~80 rows of the plane, the field of view (about 100 x 130 px once snapped and
padded) keeps them at nearly their own size.
"""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx._napari.clicks.fov import (
    FOV_TEXT,
    camera,
    canvas_size,
    visible_rect,
)
from napari_sam3_onnx._napari.tiling_switch import TILE_TEXT

from .gui_helpers import iou, settle

pytestmark = pytest.mark.gui

SHAPE = (400, 600)
BLOBS = ((130, 215, 4), (170, 250, 4), (330, 520, 4))
RR, CC = np.mgrid[: SHAPE[0], : SHAPE[1]]


def disc(r, c, rad):
    return (RR - r) ** 2 + (CC - c) ** 2 <= rad**2


def blob_image():
    img = np.zeros(SHAPE, np.uint8)
    for blob in BLOBS:
        img[disc(*blob)] = 220
    return img


def _look_at(viewer, centre, rows_visible):
    height, _ = canvas_size(viewer)
    camera(viewer).center = tuple(float(v) for v in centre)
    camera(viewer).zoom = height / rows_visible


def test_fov_embedding_is_reused_until_the_view_changes(make_widget, qtbot):
    viewer, image, w = make_widget(blob_image())
    lay, enc = w.session.layers, w.session.encoder
    assert w.fov.text() == FOV_TEXT and not w.fov.isChecked()
    lay.points.add([130, 215])
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1 and not (lay.preview.data > 0).any()  # squeezed: lost
    w.fov.setChecked(True)
    _look_at(viewer, (150, 232), 80)
    r0, c0, r1, c1 = visible_rect(viewer, image)
    assert r0 < 130 and r1 > 170 and r1 - r0 < 100 and c0 < 215 and c1 > 250
    settle(qtbot, w.session)
    assert enc.encoder_calls == 2
    assert iou(lay.preview.data > 0, disc(*BLOBS[0])) > 0.4
    region = w.session.view.regions[(image.unique_id, ())]
    assert region[2] - region[0] < 200 and region[0] <= 130 < region[2]
    lay.points.add([170, 250])  # another click in the same view: no encoding
    settle(qtbot, w.session)
    _look_at(viewer, (152, 234), 80)  # a 2-px pan
    w.session.schedule()
    settle(qtbot, w.session)
    assert enc.encoder_calls == 2
    preview = lay.preview.data > 0
    assert preview[130, 215] and preview[170, 250] and preview.shape == SHAPE
    _look_at(viewer, (300, 480), 80)  # elsewhere: the next run encodes the new view
    w.session.schedule()
    settle(qtbot, w.session)
    assert enc.encoder_calls == 3
    assert w.session.view.regions[(image.unique_id, ())] != region


def test_tiling_checkbox_answers_clicks_on_a_tile(make_widget, qtbot):
    _viewer, _image, w = make_widget(blob_image())
    lay, enc = w.session.layers, w.session.encoder
    assert w.tile.text() == TILE_TEXT and w.session.view.tiling is None
    w.tile.setChecked(True)
    lay.points.add([330, 520])
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1
    assert iou(lay.preview.data > 0, disc(*BLOBS[2])) > 0.4
    ids = w.commit()
    assert ids == [1] and lay.target.data[330, 520] == 1 and np.count_nonzero(lay.target.data) < 120
    w.tile.setChecked(False)
    assert w.session.view.tiling is None
