"""Encode ahead of a series' next image, in the dock opened the napari way, with real keys.

While the user works on image k, the next image is read and encoded in the background; the
layer Next makes for it shows that very read, so its first preview needs no encode. The
user's own encode still comes first.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
from napari.layers.utils.layer_utils import calc_data_range
from qtpy.QtCore import Qt, QTimer

from conftest import disc
from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.series.navigator import ahead_ref
from napari_sam3_onnx.api.clicks import clicks_need
from napari_sam3_onnx.api.series_ahead import SeriesSource
from napari_sam3_onnx.models.runtime import LazySession

from .conftest import open_plugin_widget
from .gui_helpers import Mouse, iou, settle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _slow_graph import build_slow_graph

pytestmark = pytest.mark.gui
WAIT = 60_000

#: Three non-square uint16 images: (shape, blob (row, col, radius)).
IMAGES = {"a": ((300, 517), (90, 140, 22)), "b": ((411, 263), (300, 80, 24)),
          "c": ((263, 411), (120, 190, 20))}


def _write(folder):
    folder.mkdir()
    for i, (name, (shape, (r, c, rad))) in enumerate(IMAGES.items()):
        img = np.full(shape, 300 + 40 * i, np.uint16)
        img[disc(shape, r, c, rad)] = 2800 + 100 * i
        tifffile.imwrite(folder / f"{name}.tif", img)


@pytest.fixture
def series_dock(make_napari_viewer, hf_bundle, tmp_path):
    viewer = make_napari_viewer()
    _dock, w = open_plugin_widget(viewer)
    w.load_bundle(hf_bundle, toy=True)
    _write(tmp_path / "images")
    return viewer, w, tmp_path


def _key(viewer, qtbot, key):
    canvas = viewer.window._qt_viewer.canvas.native
    canvas.setFocus()
    qtbot.keyClick(canvas, key)
    qtbot.wait(20)


def _click(viewer, qtbot, w, row, col, timeout=20000):
    lay = w.session.layers
    viewer.layers.selection.active = lay.points
    lay.points.mode = "add"
    mouse = Mouse(viewer, qtbot)
    pos = mouse.at(row, col)
    mouse.canvas.events.mouse_press(pos=pos, modifiers=(), button=1)
    mouse.canvas.events.mouse_release(pos=pos, modifiers=(), button=1)
    settle(qtbot, w.session, timeout=timeout)


def _next_cached(w, index):
    """Whether the read ahead of item ``index`` is encoded for a click."""
    got = w.series.navigator.reads.peek()
    enc = w.session.encoder
    return (got is not None and got.index == index
            and enc.key(ahead_ref(got), clicks_need(enc)) in enc.cache)


def _layer_key(w, layer):
    enc = w.session.encoder
    ref = layers.slice_ref(layer, (), w.session.data_version(layer))
    return enc.key(ref, clicks_need(enc))


def test_the_next_image_is_encoded_while_the_user_dwells_and_next_finds_it(series_dock,
                                                                          qtbot):
    viewer, w, tmp = series_dock
    w.prefetch.setChecked(True)
    w.series.open(tmp / "images", out=tmp / "out")
    nav = w.series.navigator
    assert nav.layer.name == "a"
    _click(viewer, qtbot, w, *IMAGES["a"][1][:2])  # the user works on image 1
    qtbot.waitUntil(lambda: _next_cached(w, 1), timeout=WAIT)  # image 2, encoded meanwhile
    assert w.ahead.scheduler.wait_idle(60)
    got = nav.reads.peek()
    assert isinstance(got.source, SeriesSource) and got.source.name == "b"
    started: list = []  # the planes encoded from now on (the background goes on to image 3)
    w.session.encoder.listen(lambda ref: started.append(ref.source))

    _key(viewer, qtbot, Qt.Key.Key_PageDown)  # Next, a real key press
    layer = nav.layer
    assert layer.name == "b" and layer.data.shape == IMAGES["b"][0]
    assert layer.data is got.data  # the very read that was encoded
    # shown as napari shows any new layer of that data, and keyed as encode ahead keyed it
    assert tuple(layer.contrast_limits) == tuple(float(v) for v in calc_data_range(layer.data))
    assert _layer_key(w, layer) in w.session.encoder.cache
    _click(viewer, qtbot, w, *IMAGES["b"][1][:2])
    shape, (r, c, rad) = IMAGES["b"]
    assert iou(w.session.layers.preview.data > 0, disc(shape, r, c, rad)) > 0.75
    assert layers.image_source(layer) not in started  # the first preview encoded nothing
    assert got.source not in started


def test_a_duplicated_series_layer_is_keyed_apart(series_dock, qtbot):
    viewer, w, tmp = series_dock
    w.prefetch.setChecked(True)
    w.series.open(tmp / "images", out=tmp / "out")
    qtbot.waitUntil(lambda: _next_cached(w, 1), timeout=WAIT)
    _key(viewer, qtbot, Qt.Key.Key_PageDown)
    layer = w.series.navigator.layer
    assert isinstance(layers.image_source(layer), SeriesSource)
    copy = viewer.add_image(np.array(layer.data), metadata=dict(layer.metadata))
    # the copy's data may change apart from the original's: it never shares its keys
    assert layers.image_source(copy) == copy.unique_id


def _slow_encodes(monkeypatch, w, graph, events):
    """Every encode of the toy model first runs the slow graph for >= 0.6 s (stoppable)."""
    adapter, session = w.workspace.adapter, LazySession(graph)
    feed = {"x": np.ones((384, 384), np.float32)}

    def slowed(real):
        def encode(rgb, *args):
            who = "ahead" if threading.current_thread().name == "encode-ahead" else "user"
            events.append(("start", who, rgb.shape))
            t0 = time.monotonic()
            while True:
                session.run(["y"], feed)
                if time.monotonic() - t0 >= 0.6:
                    break
            out = real(rgb, *args)
            events.append(("end", who, rgb.shape))
            return out
        return encode

    monkeypatch.setattr(adapter, "encode", slowed(adapter.encode))
    monkeypatch.setattr(adapter, "encode_for", slowed(adapter.encode_for))


@pytest.mark.quiet  # the order of two encodes, timed against the clock
def test_the_users_encode_preempts_the_next_images(series_dock, qtbot, monkeypatch,
                                                   tmp_path_factory):
    viewer, w, tmp = series_dock
    graph = build_slow_graph(tmp_path_factory.mktemp("slow") / "slow.onnx")
    events: list = []
    _slow_encodes(monkeypatch, w, graph, events)
    lines: list[str] = []
    poll = QTimer()
    poll.timeout.connect(lambda: lines.append(w.ahead.line.text()))
    poll.start(20)
    w.prefetch.setChecked(True)
    w.series.open(tmp / "images", out=tmp / "out")
    scheduler = w.ahead.scheduler

    def on_next():
        state = scheduler.state
        return (state.kind == "encoding" and state.ref is not None
                and isinstance(state.ref.source, SeriesSource) and state.ref.source.name == "b")

    qtbot.waitUntil(on_next, timeout=WAIT)  # image 1 encoded; image 2 in the background now
    qtbot.waitUntil(lambda: ("start", "ahead", (411, 263, 3)) in events, timeout=WAIT)
    image = w.series.navigator.layer
    image.contrast_limits = (0.0, 6000.0)  # another window: the user's click needs an encode
    _click(viewer, qtbot, w, *IMAGES["a"][1][:2], timeout=WAIT)
    assert scheduler.preempted >= 1
    started = events.index(("start", "ahead", (411, 263, 3)))
    ends = [e for e in events[started:] if e[0] == "end"]
    assert ends[0] == ("end", "user", (300, 517, 3))  # the user's encode came first
    qtbot.waitUntil(lambda: _next_cached(w, 1), timeout=WAIT)  # re-queued, then done
    poll.stop()  # the line is polled, so a pre-empted encode's first moments may not show:
    assert any("the next image (b)" in t for t in lines)  # the re-queued one's >= 0.6 s do
    _key(viewer, qtbot, Qt.Key.Key_PageDown)
    assert _layer_key(w, w.series.navigator.layer) in w.session.encoder.cache
