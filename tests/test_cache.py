import threading
import time

import numpy as np
import pytest

from napari_sam3_onnx.engine.cache import EmbeddingCache, SliceKey
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.models.base import Embedding


def _emb(nbytes):
    return Embedding({"f": np.zeros(nbytes // 4, np.float32)}, (8, 8), (4, 4))


def _key(i, **kw):
    return SliceKey(kw.get("source", "img"), kw.get("version", 0), (i,), kw.get("win"), "m")


def test_lru_eviction_by_bytes():
    cache = EmbeddingCache(budget_bytes=3000)
    for i in range(3):
        cache.put(_key(i), _emb(1000))
    assert len(cache) == 3 and cache.nbytes == 3000
    cache.get(_key(0))  # 0 becomes most recent
    cache.put(_key(3), _emb(1000))
    assert _key(1) not in cache and _key(0) in cache and _key(3) in cache
    assert cache.nbytes <= 3000


def test_oversized_entry_is_kept_alone():
    cache = EmbeddingCache(budget_bytes=100)
    cache.put(_key(0), _emb(1000))
    cache.put(_key(1), _emb(1000))
    assert len(cache) == 1 and _key(1) in cache


def test_key_covers_window_and_version():
    cache = EmbeddingCache()
    cache.put(_key(0, win=(0.0, 100.0)), _emb(40))
    assert cache.get(_key(0, win=(0.0, 200.0))) is None
    assert cache.get(_key(0, win=(0.0, 100.0), version=1)) is None
    assert cache.get(_key(0, win=(0.0, 100.0))) is not None
    assert (cache.hits, cache.misses) == (1, 2)


def test_get_or_compute_computes_once():
    cache = EmbeddingCache()
    calls = []

    def compute():
        calls.append(1)
        return _emb(40)

    a = cache.get_or_compute(_key(0), compute)
    b = cache.get_or_compute(_key(0), compute)
    assert a is b and len(calls) == 1


def test_budget_shrink_and_drop():
    cache = EmbeddingCache(budget_bytes=10_000)
    for i in range(5):
        cache.put(_key(i, source="a" if i < 3 else "b"), _emb(1000))
    assert cache.drop(lambda k: k.source == "b") == 2
    cache.budget_bytes = 1500
    assert len(cache) == 1 and cache.nbytes == 1000


# ---- single flight ------------------------------------------------------------------------
WAIT = 10.0  # seconds; only reached when a test is about to fail


def _in_thread(fn, *args):
    out: dict = {}

    def body():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    return t, out


def _until(predicate):
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def test_two_threads_asking_for_one_key_encode_it_once():
    cache, release, calls = EmbeddingCache(), threading.Event(), []
    emb = _emb(40)

    def slow():
        calls.append(threading.get_ident())
        assert release.wait(WAIT)
        return emb

    first, a = _in_thread(cache.get_or_compute, _key(0), slow)
    _until(lambda: calls)
    second, b = _in_thread(cache.get_or_compute, _key(0), slow)
    time.sleep(0.05)
    assert second.is_alive() and cache.computing(_key(0))  # waiting, not encoding
    release.set()
    first.join(WAIT), second.join(WAIT)
    assert a["value"] is emb and b["value"] is emb and len(calls) == 1
    assert (cache.misses, cache.hits) == (1, 1) and not cache.computing(_key(0))


def test_different_keys_encode_at_the_same_time():
    cache, started = EmbeddingCache(), threading.Barrier(2, timeout=WAIT)

    def together(n):
        def compute():
            started.wait()  # both computations must be running at once to get past this
            return _emb(40 * n)
        return compute

    t1, a = _in_thread(cache.get_or_compute, _key(1), together(1))
    t2, b = _in_thread(cache.get_or_compute, _key(2), together(2))
    t1.join(WAIT), t2.join(WAIT)
    assert a["value"].nbytes == 40 and b["value"].nbytes == 80
    assert _key(1) in cache and _key(2) in cache and cache.misses == 2


def test_a_failed_encode_raises_in_its_caller_and_the_waiter_encodes_again():
    """Documented choice: the error goes to the caller whose computation failed; a thread that
    was waiting for it computes the key itself (no error from someone else's run)."""
    cache, release, calls = EmbeddingCache(), threading.Event(), []
    emb = _emb(40)

    def failing():
        calls.append("fail")
        assert release.wait(WAIT)
        raise RuntimeError("encoder crashed")

    def works():
        calls.append("ok")
        return emb

    first, a = _in_thread(cache.get_or_compute, _key(0), failing)
    _until(lambda: calls)
    second, b = _in_thread(cache.get_or_compute, _key(0), works)
    time.sleep(0.05)
    assert second.is_alive() and calls == ["fail"]  # waits for the first
    release.set()
    first.join(WAIT), second.join(WAIT)
    assert isinstance(a["error"], RuntimeError) and "value" not in a
    assert b["value"] is emb and calls == ["fail", "ok"]
    assert cache.get(_key(0)) is emb and not cache.computing(_key(0))


def test_a_failed_encode_leaves_nothing_behind():
    cache = EmbeddingCache()

    def boom():
        raise ValueError("bad plane")

    with pytest.raises(ValueError, match="bad plane"):
        cache.get_or_compute(_key(0), boom)
    assert _key(0) not in cache and not cache.computing(_key(0))
    assert cache.get_or_compute(_key(0), lambda: _emb(40)).nbytes == 40  # a retry computes


def test_the_encoder_reports_each_encode_and_encodes_a_shared_plane_once():
    release, events = threading.Event(), []

    class Slow:
        def encode(self, rgb):
            assert release.wait(WAIT)
            if rgb.shape[1] == 5:
                raise RuntimeError("no")
            return Embedding({"f": rgb.astype(np.float32)}, (8, 8), rgb.shape[:2])

    encoder = SliceEncoder(Slow())  # type: ignore[arg-type]
    remove = encoder.listen(lambda ref: events.append(("start", ref.index)),
                            lambda ref, err: events.append(("end", ref.index, type(err))))
    stack = np.arange(2 * 4 * 7, dtype=np.uint8).reshape(2, 4, 7)
    ref = SliceRef(stack, (1,), source="s")
    threads = [_in_thread(encoder.embed, ref) for _ in range(3)]
    _until(lambda: events)
    release.set()
    for t, _ in threads:
        t.join(WAIT)
    assert encoder.encoder_calls == 1
    assert len({id(out["value"]) for _, out in threads}) == 1
    assert events == [("start", (1,)), ("end", (1,), type(None))]
    with pytest.raises(RuntimeError):
        encoder.embed(SliceRef(stack[:, :, :5], (0,), source="narrow"))
    assert events[-1] == ("end", (0,), RuntimeError)
    remove()
    encoder.embed(SliceRef(stack, (0,), source="s"))
    assert len(events) == 4 and encoder.encoder_calls == 2  # no longer listened to
