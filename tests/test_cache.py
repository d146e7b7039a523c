import numpy as np

from napari_sam3_onnx.engine.cache import EmbeddingCache, SliceKey
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
