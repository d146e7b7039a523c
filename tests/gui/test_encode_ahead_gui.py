"""Encode ahead in the dock opened the napari way: the default, the direction, yielding, pace."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from qtpy.QtCore import QTimer

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.clicks.ahead import AHEAD_TEXT, IDLE_TEXT
from napari_sam3_onnx.engine.encode_ahead import available_bytes, memory_allows
from napari_sam3_onnx.models.runtime import LazySession

from .gui_helpers import blob_stack, settle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _slow_graph import build_slow_graph

pytestmark = pytest.mark.gui
WAIT = 60_000


@pytest.fixture(scope="module")
def slow_graph(tmp_path_factory):
    return build_slow_graph(tmp_path_factory.mktemp("slow") / "slow.onnx")


def _show(viewer, z):
    viewer.dims.set_current_step(0, z)


def _cached(w, image):
    enc = w.session.encoder
    version = w.session.data_version(image)
    return sorted(z for z in range(image.data.shape[0])
                  if enc.key(layers.slice_ref(image, (z,), version)) in enc.cache)


def _slow_encodes(monkeypatch, w, graph, events):
    """Every encode of the toy model first runs the slow graph for >= 0.6 s (stoppable)."""
    adapter, session = w.workspace.adapter, LazySession(graph)
    feed = {"x": np.ones((384, 384), np.float32)}

    def slowed(real):
        def encode(rgb, *args):
            who = "ahead" if threading.current_thread().name == "encode-ahead" else "user"
            events.append(("start", who))
            t0 = time.monotonic()
            while True:  # >= 0.6 s of stoppable work whatever the CPU (one run: ~0.07-1 s)
                session.run(["y"], feed)
                if time.monotonic() - t0 >= 0.6:
                    break
            out = real(rgb, *args)
            events.append(("end", who))
            return out
        return encode

    monkeypatch.setattr(adapter, "encode", slowed(adapter.encode))
    monkeypatch.setattr(adapter, "encode_for", slowed(adapter.encode_for))


def test_on_by_default_where_memory_allows_and_says_what_it_does(
        encode_ahead_default, make_widget, qtbot):
    stack, _truth, _centre = blob_stack()
    viewer, image, w = make_widget(stack)
    assert w.prefetch.text() == AHEAD_TEXT
    assert w.prefetch.isChecked() == memory_allows(available_bytes())
    w.prefetch.setChecked(True)
    _show(viewer, 3)
    qtbot.waitUntil(lambda: _cached(w, image) == [3, 4], timeout=WAIT)
    assert w.ahead.scheduler.wait_idle(60)
    w.prefetch.setChecked(False)
    qtbot.waitUntil(lambda: not w.ahead.line.isVisible() or "ahead" not in w.ahead.line.text(),
                    timeout=WAIT)


def test_the_status_line_stays_while_encode_ahead_is_on(make_widget, qtbot):
    """Hiding and showing the line between two background encodes laid the dock out again
    (in a shown window the canvas was resized and redrawn: the longest stalls while encoding
    ahead, see docs/performance.md); it now goes only when the switch is turned off."""
    stack, _truth, _centre = blob_stack()
    viewer, image, w = make_widget(stack)
    w.prefetch.setChecked(True)
    _show(viewer, 3)
    qtbot.waitUntil(lambda: _cached(w, image) == [3, 4], timeout=WAIT)
    assert w.ahead.scheduler.wait_idle(60)
    w.ahead.refresh()  # nothing to do: the line stays, saying so
    assert not w.ahead.line.isHidden() and w.ahead.line.text() == IDLE_TEXT
    w.prefetch.setChecked(False)  # switched off: the line goes (the user's own action)
    assert w.ahead.line.isHidden()


def test_moving_up_then_down_encodes_the_planes_that_way(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, image, w = make_widget(stack)
    w.prefetch.setChecked(True)
    _show(viewer, 3)  # up from the middle plane (2): 3 and the one above it
    qtbot.waitUntil(lambda: _cached(w, image) == [3, 4], timeout=WAIT)
    _show(viewer, 1)  # down: 1 and the one below it
    qtbot.waitUntil(lambda: _cached(w, image) == [0, 1, 3, 4], timeout=WAIT)
    assert w.ahead.scheduler.direction == -1
    _show(viewer, 2)  # up again: 2 (3 and 4 are cached)
    qtbot.waitUntil(lambda: _cached(w, image) == [0, 1, 2, 3, 4], timeout=WAIT)
    assert w.ahead.scheduler.direction == 1 and w.ahead.scheduler.wait_idle(60)
    calls = w.session.encoder.encoder_calls
    w.prefetch.setChecked(False)
    lay = w.session.layers
    _show(viewer, 4)
    lay.points.add([4, *centre(4, "A")[:2]])  # a click on a plane encoded ahead: no encode
    settle(qtbot, w.session)
    assert (lay.preview.data[4] > 0).any()
    assert w.session.encoder.encoder_calls == calls


@pytest.mark.quiet  # the order of two encodes and a 20 ms status poll: timed against the clock
def test_a_click_on_another_plane_gets_its_encode_first(make_widget, qtbot, monkeypatch,
                                                        slow_graph):
    stack, truth, centre = blob_stack()
    viewer, image, w = make_widget(stack)
    events: list = []
    _slow_encodes(monkeypatch, w, slow_graph, events)
    lines = []
    poll = QTimer()
    poll.timeout.connect(lambda: lines.append(w.ahead.line.text()))
    poll.start(20)
    w.prefetch.setChecked(True)
    _show(viewer, 3)  # up from 2: 3, then 4, are encoded in the background
    qtbot.waitUntil(lambda: ("start", "ahead") in events, timeout=WAIT)
    lay = w.session.layers
    _show(viewer, 0)
    lay.points.add([0, *centre(0, "B")[:2]])  # the user's click on plane 0, at once
    settle(qtbot, w.session, timeout=WAIT)
    poll.stop()
    assert w.ahead.scheduler.preempted >= 1
    # the background's encode began first but the user's plane was encoded before it ended
    first_end = events.index(next(e for e in events if e[0] == "end"))
    assert events[first_end] == ("end", "user")
    assert any("paused: your encode first" in t for t in lines)
    preview = lay.preview.data[0] > 0
    inter = (preview & truth(0, "B")).sum()
    assert inter / (preview | truth(0, "B")).sum() > 0.75  # the right plane's answer
    assert w.ahead.scheduler.wait_idle(60)
    assert 0 in _cached(w, image)


@pytest.mark.quiet  # counts a 10 ms timer's ticks: run alone, never beside CPU-heavy work
def test_the_qt_thread_keeps_ticking_while_it_encodes(make_widget, qtbot, monkeypatch,
                                                      slow_graph):
    stack, _truth, _centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    events: list = []
    _slow_encodes(monkeypatch, w, slow_graph, events)
    ticks: list[float] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start(10)
    w.prefetch.setChecked(True)
    _show(viewer, 3)
    qtbot.waitUntil(lambda: ("start", "ahead") in events, timeout=WAIT)
    start, t0 = len(ticks), time.monotonic()
    qtbot.waitUntil(lambda: events.count(("end", "ahead")) >= 2, timeout=WAIT)
    elapsed = time.monotonic() - t0
    timer.stop()
    during = ticks[start:]
    # two slow encodes (onnxruntime work) ran beside the Qt thread: it kept ticking throughout
    # (a blocked thread gives a handful of ticks for the time that passed, and one long gap).
    # The bound is relative to how long the encodes took, which depends on the machine.
    assert elapsed > 0.1 and len(during) >= 0.3 * elapsed / 0.010
    assert max(np.diff(during)) < 1.0
