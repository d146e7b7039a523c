"""The zarr embedding store: signatures, fp16, half-written entries, resumable precompute."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.store.embedding_store import (
    ENTRY_KEY,
    BundleTag,
    EmbeddingStore,
    EntryKey,
    EntryStatus,
    StoreError,
    StoreMismatchError,
    fingerprint,
    safe_name,
)
from napari_sam3_onnx.engine.store.precompute import StoreBackedEncoder, precompute
from napari_sam3_onnx.models.base import Embedding
from napari_sam3_onnx.models.bundle import open_adapter

TAG = BundleTag("hf-tracker", "hf-tracker", "abc")


def stack(n=5, shape=(60, 90)):
    """uint16 planes that all differ (a blob walks to the right and brightens with z)."""
    return np.stack([blob_image(shape, ((20 + z, 15 + 12 * z, 6),), value=1000 + 400 * z,
                                dtype=np.uint16) for z in range(n)])


def fake_embedding(seed=0):
    rng = np.random.default_rng(seed)
    feats = {"image_embeddings.0": rng.normal(size=(1, 2, 24, 24)).astype(np.float32),
             "odd/name": rng.normal(size=(1, 3, 12, 12)).astype(np.float32),
             "ids": np.arange(6, dtype=np.int64)}
    return Embedding(feats, (84, 84), (60, 90))


def key(plane, index=(2,), window=(0.0, 3000.0), image="cells"):
    return EntryKey(image, index, fingerprint(plane), window)


class Counting:
    """Wraps an adapter; counts encodes and can fail after a number of them."""

    def __init__(self, adapter, fail_after=None):
        self.adapter, self.fail_after, self.calls = adapter, fail_after, 0

    def __getattr__(self, name):
        return getattr(self.adapter, name)

    def encode(self, rgb):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("simulated Ctrl+C")
        self.calls += 1
        return self.adapter.encode(rgb)


@pytest.fixture(scope="module")
def adapter(hf_bundle):
    return open_adapter(hf_bundle)


def refs(data, window=(0.0, 3000.0)):
    return [SliceRef(data, (z,), window=window, source="cells") for z in range(data.shape[0])]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_round_trip(tmp_path, precision):
    store = EmbeddingStore(tmp_path / "s.zarr", TAG, precision)
    emb = fake_embedding()
    plane = stack()[2]
    back_from_put = store.put(key(plane), emb)
    reopened = EmbeddingStore(tmp_path / "s.zarr", TAG, mode="r")  # precision from the store
    assert reopened.precision == precision
    got = reopened.get(key(plane))
    assert got.input_size == (84, 84) and got.image_shape == (60, 90)
    assert list(got.features) == list(emb.features)
    for name, arr in emb.features.items():
        assert got.features[name].dtype == arr.dtype and got.features[name].shape == arr.shape
        np.testing.assert_array_equal(got.features[name], back_from_put.features[name])
        if precision == "fp32" or arr.dtype.kind == "i":
            np.testing.assert_array_equal(got.features[name], arr)
        else:
            np.testing.assert_allclose(got.features[name], arr, rtol=1e-3, atol=1e-3)
            assert not np.array_equal(got.features[name], arr)  # really rounded


def test_fp16_store_is_smaller_and_fp16_overflow_is_refused(tmp_path):
    rng = np.random.default_rng(1)
    big = Embedding({"x": rng.normal(size=(1, 8, 64, 64)).astype(np.float32)}, (84, 84), (9, 9))
    sizes = {}
    for p in ("fp32", "fp16"):
        EmbeddingStore(tmp_path / p, TAG, p).put(key(np.zeros(3)), big)
        sizes[p] = sum(f.stat().st_size for f in (tmp_path / p).rglob("*") if f.is_file())
    assert sizes["fp16"] < 0.6 * sizes["fp32"]
    huge = Embedding({"x": np.full((2, 2), 1e6, np.float32)}, (84, 84), (9, 9))
    with pytest.raises(StoreError, match="float16"):
        EmbeddingStore(tmp_path / "o", TAG, "fp16").put(key(np.zeros(3)), huge)


def test_mismatched_signatures_are_refused(tmp_path):
    data = stack()
    store = EmbeddingStore(tmp_path / "s.zarr", TAG)
    store.put(key(data[2]), fake_embedding())
    assert store.status(key(data[2])) is EntryStatus.COMPLETE
    other_window = key(data[2], window=(0.0, 2000.0))
    other_data = key(data[3])  # same place (image "cells", z=2), other pixels
    one_pixel = data[2].copy()
    one_pixel[59, 89] += 1
    for wrong in (other_window, other_data, key(one_pixel), key(data[2], window=None)):
        assert store.status(wrong) is EntryStatus.MISMATCH
        assert store.get(wrong) is None
    # another layout or other weights: the whole store is refused, with what to do about it
    for tag in (BundleTag("hf-tracker", "pagarcia-tracker", "abc"),
                BundleTag("hf-tracker", "hf-tracker", "other-weights")):
        with pytest.raises(StoreMismatchError, match="--replace-store"):
            EmbeddingStore(tmp_path / "s.zarr", tag)
    with pytest.raises(StoreMismatchError, match=r"fp32.*fp16"):
        EmbeddingStore(tmp_path / "s.zarr", TAG, "fp16")
    # the same files under another folder name are the same bundle: their entries are shared
    renamed = EmbeddingStore(tmp_path / "s.zarr", BundleTag("copy-of-it", "hf-tracker", "abc"))
    assert renamed.get(key(data[2])) is not None
    assert store.refused == 4 and store.hits == 0
    assert store.get(key(data[2])) is not None and store.hits == 1
    assert store.status(key(data[2], index=(3,))) is EntryStatus.MISSING


def test_half_written_entry_is_recomputed(tmp_path, adapter, hf_bundle, monkeypatch):
    data = stack()
    store = EmbeddingStore(tmp_path / "s.zarr", BundleTag.for_folder(hf_bundle, adapter.layout))
    enc = StoreBackedEncoder(Counting(adapter), store)
    ref = refs(data)[1]
    real_create = type(store._root).create_array

    def crash_on_second_array(group, name, **kw):
        if name == "f1":
            raise OSError("disk full")
        return real_create(group, name, **kw)

    monkeypatch.setattr(type(store._root), "create_array", crash_on_second_array)
    with pytest.raises(OSError):
        enc.ensure(ref)
    monkeypatch.undo()
    k = enc.entry_key(ref, data[1])
    # the half entry was written under a temporary name and removed: nothing half is visible
    assert store.status(k) is EntryStatus.MISSING and store.get(k) is None
    assert [p.name for p in (tmp_path / "s.zarr" / "cells").iterdir()] == ["zarr.json"]
    # an entry whose marker is off (an older writer, a hand copy) is recomputed as well
    assert enc.ensure(ref) is True and store.status(k) is EntryStatus.COMPLETE
    meta = store._root[k.path].attrs[ENTRY_KEY]
    store._root[k.path].attrs[ENTRY_KEY] = {**meta, "complete": False}
    assert store.status(k) is EntryStatus.INCOMPLETE and store.get(k) is None
    assert enc.ensure_entry(ref) == "repaired" and store.status(k) is EntryStatus.COMPLETE
    assert enc.adapter.calls == 3


def test_precompute_twice_encodes_once_and_store_feeds_a_new_encoder(tmp_path, adapter, hf_bundle):
    data = stack()
    tag = BundleTag.for_folder(hf_bundle, adapter.layout)
    first = StoreBackedEncoder(Counting(adapter), EmbeddingStore(tmp_path / "s.zarr", tag))
    seen = []
    rep = precompute(first, refs(data), progress=lambda d, t: seen.append((d, t)))
    assert (rep.encoded, rep.skipped, first.adapter.calls) == (5, 0, 5) and seen[-1] == (5, 5)
    again = StoreBackedEncoder(Counting(adapter), EmbeddingStore(tmp_path / "s.zarr", tag))
    rep = precompute(again, refs(data))
    assert (rep.encoded, rep.skipped, again.adapter.calls) == (0, 5, 0)
    # the widget's path: embed() through the in-memory cache, served from disk, no encoding
    reader = StoreBackedEncoder(Counting(adapter),
                                EmbeddingStore(tmp_path / "s.zarr", tag, mode="r"))
    for z in (4, 0):
        got = reader.embed(refs(data)[z])
        direct = adapter.encode(reader.rgb(refs(data)[z]))
        for name, arr in direct.features.items():
            np.testing.assert_array_equal(got.features[name], arr)
    assert reader.adapter.calls == 0 and reader.store.hits == 2
    # another window is another picture: encoded again, never read from the old entries
    other = StoreBackedEncoder(Counting(adapter), EmbeddingStore(tmp_path / "s.zarr", tag))
    assert precompute(other, refs(data, window=(0.0, 5000.0))).encoded == 5


def test_interrupted_precompute_resumes_with_the_missing_slices_only(tmp_path, adapter, hf_bundle):
    data = stack(6)
    tag = BundleTag.for_folder(hf_bundle, adapter.layout)
    enc = StoreBackedEncoder(Counting(adapter, fail_after=4),
                             EmbeddingStore(tmp_path / "s.zarr", tag))
    with pytest.raises(KeyboardInterrupt):
        precompute(enc, refs(data))
    store = EmbeddingStore(tmp_path / "s.zarr", tag)
    assert store.entries("cells") == ["00000", "00001", "00002", "00003"]
    resumed = StoreBackedEncoder(Counting(adapter), store)
    rep = precompute(resumed, refs(data))
    assert (rep.encoded, rep.skipped, resumed.adapter.calls, store.writes) == (2, 4, 2, 2)
    assert store.entries("cells") == [f"{z:05d}" for z in range(6)]


def test_store_guards_its_folder(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not an embedding store"):
        EmbeddingStore(tmp_path / "busy", TAG)
    import zarr

    zarr.open_group(str(tmp_path / "img.zarr"), mode="a").create_array("0", shape=(2,), dtype="u1")
    with pytest.raises(StoreError, match="not a napari-sam3-onnx"):
        EmbeddingStore(tmp_path / "img.zarr", TAG)
    with pytest.raises(StoreError, match="No embedding store"):
        EmbeddingStore(tmp_path / "none.zarr", TAG, mode="r")
    (tmp_path / "file.zarr").write_text("mine")
    with pytest.raises(StoreError, match="is a file"):
        EmbeddingStore(tmp_path / "file.zarr", TAG)
    assert (tmp_path / "file.zarr").read_text() == "mine"
    EmbeddingStore(tmp_path / "ok.zarr", TAG)
    ro = EmbeddingStore(tmp_path / "ok.zarr", TAG, mode="r")
    with pytest.raises(StoreError, match="read-only"):
        ro.put(key(np.zeros(2)), fake_embedding())
    assert safe_name("a/b c") == "a_b_c" and safe_name("__x") == "___x"
    assert EntryKey("a", (1, 3), "f").path == "a/00001-00003" and EntryKey("a", (), "f").path \
        == "a/plane"
