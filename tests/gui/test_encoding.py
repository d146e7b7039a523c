"""An encode is visible (bar, seconds, napari activity) and the wait for it can be cancelled."""

from __future__ import annotations

import numpy as np
import pytest

from .gui_helpers import blob_stack, iou, settle
from .test_robustness import _gate_encoder

pytestmark = pytest.mark.gui


def test_a_slow_encode_shows_progress_and_cancel_drops_its_preview(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, enc, k = w.session.layers, w.session.encoder, 2
    gate, started = _gate_encoder(w.session)  # an encoder that waits: a 16-20 s SAM 3 encode
    viewer.dims.set_current_step(0, k)
    lay.points.add([k, *centre(k, "A")[:2]])
    qtbot.waitUntil(started.is_set, timeout=3000)
    assert not w.encoding.isHidden() and not w.encoding.cancel.isHidden()
    assert w.encoding._activity is not None  # listed in napari's activity panel
    qtbot.waitUntil(lambda: "1 s" in w.status.text(), timeout=3000)  # seconds counted
    w.encoding.cancel.click()
    assert w.encoding.isHidden() and w.encoding._activity is None
    assert "cancelled" in w.status.text()
    gate.set()
    settle(qtbot, w.session)
    assert not lay.preview.data.any()  # the cancelled wait's result was dropped
    assert "cancelled" in w.status.text()  # no 'Plane encoded' after a cancel
    lay.points.add([k, *centre(k, "A")[:2]])  # the same plane again: from the cache
    settle(qtbot, w.session)
    assert enc.encoder_calls == 1
    assert iou(lay.preview.data[k] > 0, truth(k, "A")) > 0.75


def test_the_second_encode_has_an_estimated_bar(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay = w.session.layers
    viewer.dims.set_current_step(0, 0)
    lay.points.add([0, *centre(0, "A")[:2]])
    settle(qtbot, w.session)
    assert w.encoding.last_seconds is not None and w.encoding.isHidden()
    gate, started = _gate_encoder(w.session)
    viewer.dims.set_current_step(0, 1)
    lay.points.add([1, *centre(1, "A")[:2]])
    qtbot.waitUntil(started.is_set, timeout=3000)
    assert w.progress.maximum() == 1000  # determinate: estimated from the first encode
    gate.set()
    settle(qtbot, w.session)
    assert w.encoding.isHidden() and np.any(lay.preview.data[1])
