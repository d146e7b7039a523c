"""The encode-ahead scheduler, headless: direction, planes ahead, budget, pre-emption, store."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from _slow_graph import SlowAdapter, build_slow_graph
from napari_sam3_onnx.engine.encode_ahead import (
    EncodeAhead,
    Pending,
    available_bytes,
    memory_allows,
    planes_ahead,
)
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.store.embedding_store import BundleTag, EmbeddingStore
from napari_sam3_onnx.engine.store.keys import EntryStatus
from napari_sam3_onnx.engine.store.precompute import StoreBackedEncoder

WAIT = 120
DEPTH = 10


@pytest.fixture(scope="module")
def quick_graph(tmp_path_factory):
    return build_slow_graph(tmp_path_factory.mktemp("quick") / "quick.onnx", links=4, side=64)


@pytest.fixture(scope="module")
def slow_graph(tmp_path_factory):
    return build_slow_graph(tmp_path_factory.mktemp("slow") / "slow.onnx")


def stack():
    """``(10, 7, 12)`` uint8: plane z is ``10 * z + 5`` but for a black first row."""
    planes = [np.full((7, 12), 10 * z + 5, np.uint8) for z in range(DEPTH)]
    for p in planes:
        p[0] = 0
    return np.stack(planes)


def ref(data, z):
    return SliceRef(data, (z,), window=(0.0, 255.0), source="s")


def cached(encoder, data):
    return sorted(z for z in range(DEPTH) if encoder.key(ref(data, z)) in encoder.cache)


def until(predicate, timeout=WAIT):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


@pytest.fixture
def make():
    made = []

    def factory(encoder, **kwargs):
        ahead = EncodeAhead(encoder, **kwargs)
        made.append(ahead)
        return ahead

    yield factory
    for ahead in made:
        ahead.close()


def test_planes_ahead_stop_at_the_stack_ends():
    data = stack()
    assert [r.index for r in planes_ahead(ref(data, 7), data.shape, 1, 4)] == [(8,), (9,)]
    assert [r.index for r in planes_ahead(ref(data, 1), data.shape, -1, 3)] == [(0,)]
    assert planes_ahead(SliceRef(data[0], ()), data[0].shape, 1, 3) == []


def test_follows_the_direction_the_user_moved(quick_graph, make):
    data = stack()
    encoder = SliceEncoder(SlowAdapter(quick_graph))  # type: ignore[arg-type]
    ahead = make(encoder, ahead=2)
    ahead.follow(ref(data, 5), data.shape)  # no move yet: upwards
    assert ahead.wait_idle(WAIT)
    assert cached(encoder, data) == [5, 6, 7]
    ahead.follow(ref(data, 4), data.shape)  # moved down
    assert ahead.direction == -1 and ahead.wait_idle(WAIT)
    assert cached(encoder, data) == [2, 3, 4, 5, 6, 7]
    ahead.follow(ref(data, 6), data.shape)  # up again: 7 is cached, 8 is new
    assert ahead.direction == 1 and ahead.wait_idle(WAIT)
    assert cached(encoder, data) == [2, 3, 4, 5, 6, 7, 8]
    assert encoder.encoder_calls == 7 and ahead.encoded == 7
    # each embedding is its own plane's
    for z in cached(encoder, data):
        assert encoder.cached(ref(data, z)).features["f"].max() == 10 * z + 5


def test_the_cache_budget_bounds_the_planes_ahead(quick_graph, make):
    data = stack()
    encoder = SliceEncoder(SlowAdapter(quick_graph))  # type: ignore[arg-type]
    size = encoder.embed(ref(data, 3)).nbytes  # the user's plane
    encoder.cache.budget_bytes = 3 * size  # room for the current plane and two more
    ahead = make(encoder, ahead=5)
    ahead.follow(ref(data, 3), data.shape)
    assert ahead.wait_idle(WAIT)
    assert cached(encoder, data) == [3, 4, 5]  # not 6..8: that would evict the user's plane


def test_too_little_memory_encodes_nothing(quick_graph, make):
    data = stack()
    encoder = SliceEncoder(SlowAdapter(quick_graph))  # type: ignore[arg-type]
    ahead = make(encoder, memory=lambda: 1 << 20)
    ahead.follow(ref(data, 2), data.shape)
    assert ahead.wait_idle(WAIT)
    assert cached(encoder, data) == [] and ahead.state.kind == "memory"
    assert memory_allows(None) and not memory_allows(10, 6) and memory_allows(12, 6)


def test_available_bytes_reads_meminfo(tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24000000 kB\nMemAvailable:    1234567 kB\n")
    assert available_bytes(info) == 1234567 * 1024
    assert available_bytes(tmp_path / "none") is None
    real = available_bytes()
    assert real is None or real > 0


def test_a_user_encode_preempts_the_background_which_is_requeued(slow_graph, make):
    data = stack()
    adapter = SlowAdapter(slow_graph)
    encoder = SliceEncoder(adapter)  # type: ignore[arg-type]
    ahead = make(encoder, ahead=1)
    ahead.follow(ref(data, 5), data.shape)
    until(lambda: ahead.state.kind == "encoding" and adapter.started)
    assert ahead.state.text == "encoding z=5 ahead"
    seen = []
    encoder.listen(lambda r: seen.append(ahead.state.text))
    user = encoder.embed(ref(data, 1))  # the user's click on another plane
    assert user.features["f"].max() == 15
    assert ahead.preempted == 1
    assert seen == ["paused: your encode first"]
    # the user's plane finished first; the stopped one was never served half-done
    assert adapter.finished[0] == 15
    assert ahead.wait_idle(WAIT)
    assert cached(encoder, data) == [1, 5, 6]
    assert adapter.started.count(55) == 2 and adapter.finished.count(55) == 1
    assert encoder.encoder_calls == 3


def test_the_user_asking_for_the_plane_being_encoded_waits_for_it(slow_graph, make):
    data = stack()
    adapter = SlowAdapter(slow_graph)
    encoder = SliceEncoder(adapter)  # type: ignore[arg-type]
    ahead = make(encoder, ahead=0)
    ahead.follow(ref(data, 5), data.shape)
    until(lambda: ahead.state.kind == "encoding" and adapter.started)
    emb = encoder.embed(ref(data, 5))  # joins the encode under way
    assert emb.features["f"].max() == 55
    assert ahead.preempted == 0 and adapter.started == [55] and encoder.encoder_calls == 1


def test_moving_on_stops_what_is_no_longer_planned_and_stores_only_whole_entries(
        slow_graph, tmp_path, make):
    data = stack()
    store = EmbeddingStore(tmp_path / "s.zarr", BundleTag("slow", "slow", "w"))
    adapter = SlowAdapter(slow_graph)
    encoder = StoreBackedEncoder(adapter, store)  # type: ignore[arg-type]
    ahead = make(encoder, ahead=1)
    ahead.follow(ref(data, 2), data.shape)
    until(lambda: ahead.state.kind == "encoding" and adapter.started)
    ahead.follow(ref(data, 8), data.shape)  # a jump: 2 and 3 are no longer wanted
    assert ahead.wait_idle(WAIT)
    assert ahead.preempted == 1
    assert cached(encoder, data) == [8, 9]

    def status(z):
        return store.check(encoder.entry_key(ref(data, z), data[z]))

    assert [status(z) for z in (8, 9)] == [EntryStatus.COMPLETE] * 2
    assert status(2) == EntryStatus.MISSING and status(3) == EntryStatus.MISSING
    reopened = EmbeddingStore(tmp_path / "s.zarr", BundleTag("slow", "slow", "w"), mode="r")
    assert reopened.get(encoder.entry_key(ref(data, 9), data[9])).features["f"].max() == 95


def test_a_series_hook_plans_the_next_images(quick_graph, make):
    images = [np.arange(66, dtype=np.uint8).reshape(6, 11) + i for i in range(4)]
    encoder = SliceEncoder(SlowAdapter(quick_graph))  # type: ignore[arg-type]
    ahead = make(encoder, ahead=2)
    ahead.series = lambda count: [SliceRef(im, (), window=(0.0, 255.0), source=f"img{i}")
                                  for i, im in enumerate(images[1:1 + count], start=1)]
    plan = ahead.follow(SliceRef(images[0], (), window=(0.0, 255.0), source="img0"), ())
    assert [r.source for r in plan] == ["img0", "img1", "img2"]
    assert ahead.wait_idle(WAIT)
    assert len(encoder.cache) == 3


def test_switched_off_it_stops_and_encodes_nothing(slow_graph, make):
    data = stack()
    adapter = SlowAdapter(slow_graph)
    encoder = SliceEncoder(adapter)  # type: ignore[arg-type]
    ahead = make(encoder)
    ahead.follow(ref(data, 4), data.shape)
    until(lambda: ahead.state.kind == "encoding")
    ahead.enabled = False
    assert ahead.wait_idle(WAIT) and ahead.state.kind == "off"
    assert len(encoder.cache) == 0 and ahead.follow(ref(data, 5), data.shape) == []
    done = threading.Event()
    threading.Timer(0.2, done.set).start()
    done.wait()
    assert len(encoder.cache) == 0


def test_a_pending_image_is_read_in_the_background_and_kept_over_replans(slow_graph, make):
    data = stack()
    adapter = SlowAdapter(slow_graph)
    encoder = SliceEncoder(adapter)  # type: ignore[arg-type]
    ahead = make(encoder, ahead=1)
    reads: list[str] = []

    def resolve():
        reads.append(threading.current_thread().name)
        return SliceRef(data[7], (), window=(0.0, 255.0), source="next")

    ahead.series = lambda count: [Pending("image 2", resolve)]
    current = SliceRef(data[2], (), window=(0.0, 255.0), source="this")
    plan = ahead.follow(current, ())
    assert plan[0] == current and plan[1] == Pending("image 2", resolve)
    until(lambda: ahead.state.kind == "encoding" and 75 in adapter.started)
    assert ahead.state.text == "encoding the next image ahead"
    ahead.follow(current, ())  # the user clicks on again: the next image's encode goes on
    ahead.follow(current, ())
    assert ahead.wait_idle(WAIT)
    assert ahead.preempted == 0 and adapter.started.count(75) == 1
    assert reads == ["encode-ahead"]  # read in the background thread, once
    assert encoder.key(SliceRef(data[7], (), window=(0.0, 255.0), source="next")) in \
        encoder.cache


def test_a_user_encode_preempts_a_pending_image_which_is_requeued(slow_graph, make):
    data = stack()
    adapter = SlowAdapter(slow_graph)
    encoder = SliceEncoder(adapter)  # type: ignore[arg-type]
    ahead = make(encoder, ahead=1)
    nxt = SliceRef(data[7], (), window=(0.0, 255.0), source="next")
    ahead.series = lambda count: [Pending("image 2", lambda: nxt)]
    ahead.follow(SliceRef(data[2], (), window=(0.0, 255.0), source="this"), ())
    until(lambda: ahead.state.kind == "encoding" and 75 in adapter.started)
    user = encoder.embed(ref(data, 1))  # the user's own encode
    assert user.features["f"].max() == 15 and ahead.preempted == 1
    assert ahead.wait_idle(WAIT)
    assert adapter.finished == [25, 15, 75]  # this image, the user's, the next (re-queued)
    assert encoder.key(nxt) in encoder.cache
    assert adapter.started.count(75) == 2 and adapter.finished.count(75) == 1


def test_a_pending_image_that_resolves_to_nothing_is_skipped(quick_graph, make):
    encoder = SliceEncoder(SlowAdapter(quick_graph))  # type: ignore[arg-type]
    ahead = make(encoder, ahead=2)
    ahead.series = lambda count: [Pending("unreadable", lambda: None)]
    image = np.zeros((6, 11), np.uint8)
    ahead.follow(SliceRef(image, (), window=(0.0, 255.0), source="this"), ())
    assert ahead.wait_idle(WAIT) and len(encoder.cache) == 1
    assert ahead.state.kind == "idle"
