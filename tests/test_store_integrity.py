"""The embedding store never serves a lost chunk or a flipped byte, and `store verify` says so."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.store.embedding_store import (
    ENTRY_KEY,
    BundleTag,
    EmbeddingStore,
    EntryKey,
    fingerprint,
)
from napari_sam3_onnx.engine.store.files import TMP_PREFIX, checksum
from napari_sam3_onnx.engine.store.precompute import StoreBackedEncoder, precompute
from napari_sam3_onnx.engine.store.verify import EntryState, verify_store
from napari_sam3_onnx.models.base import Embedding
from napari_sam3_onnx.models.bundle import open_adapter

TAG = BundleTag("hf-tracker", "hf-tracker", "sha256:abc")


def stack(n=4, shape=(60, 90)):
    return np.stack([blob_image(shape, ((18 + z, 14 + 13 * z, 6),), value=1100 + 500 * z,
                                dtype=np.uint16) for z in range(n)])


def big_embedding(seed=0):
    """Features over two chunks (6.3 MB fp32 > CHUNK_BYTES) plus a small one and an int one."""
    rng = np.random.default_rng(seed)
    return Embedding({"big": rng.normal(size=(1, 96, 128, 128)).astype(np.float32),
                      "small": rng.normal(size=(1, 4, 9, 7)).astype(np.float32),
                      "ids": np.arange(5, dtype=np.int64)}, (84, 84), (60, 90))


def chunk_files(store_path, entry, array="f0"):
    return sorted(p for p in (store_path / entry / array / "c").rglob("*") if p.is_file())


def flip_byte(path, at=None):
    raw = bytearray(path.read_bytes())
    at = len(raw) // 2 if at is None else at
    raw[at] ^= 0x5A
    path.write_bytes(bytes(raw))


def refs(data, window=(0.0, 3000.0)):
    return [SliceRef(data, (z,), window=window, source="cells") for z in range(data.shape[0])]


class Counting:
    def __init__(self, adapter):
        self.adapter, self.calls = adapter, 0

    def __getattr__(self, name):
        return getattr(self.adapter, name)

    def encode(self, rgb):
        self.calls += 1
        return self.adapter.encode(rgb)


@pytest.fixture(scope="module")
def adapter(hf_bundle):
    return open_adapter(hf_bundle)


def test_checksum_sees_values_not_layout():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert checksum(a) == checksum(a.copy()) == checksum(a.astype(">f4"))
    b = a.copy()
    b[2, 3] = np.nextafter(b[2, 3], 100)  # one ulp
    assert checksum(b) != checksum(a)
    assert checksum(np.zeros(10, np.float32)) != checksum(np.zeros(11, np.float32))


@pytest.mark.parametrize("damage", ["delete chunk", "flip byte", "delete array metadata"])
def test_a_damaged_entry_is_a_miss_never_zeros(tmp_path, damage):
    path = tmp_path / "s.zarr"
    store = EmbeddingStore(path, TAG)
    plane = stack()[1]
    k = EntryKey("cells", (1,), fingerprint(plane), (0.0, 3000.0))
    store.put(k, big_embedding())
    chunks = chunk_files(path, k.path)
    assert len(chunks) == 2  # the damage hits one chunk of two
    if damage == "delete chunk":
        chunks[1].unlink()
    elif damage == "flip byte":
        flip_byte(chunks[0])
    else:
        (path / k.path / "f1" / "zarr.json").unlink()
    assert store.status(k) == "complete"  # the marker alone would have trusted it
    assert store.check(k) == "corrupt"
    assert store.get(k) is None and (store.corrupt, store.hits) == (1, 0)
    store.put(k, big_embedding())
    got = store.get(k)
    np.testing.assert_array_equal(got.features["big"], big_embedding().features["big"])
    assert store.hits == 1


def test_a_chunk_that_is_zeros_on_purpose_is_fine(tmp_path):
    # zarr does not write chunks equal to the fill value: their absence is not damage
    emb = Embedding({"z": np.zeros((1, 96, 128, 128), np.float32)}, (84, 84), (9, 9))
    store = EmbeddingStore(tmp_path / "s.zarr", TAG)
    k = EntryKey("cells", (0,), "f")
    store.put(k, emb)
    assert chunk_files(tmp_path / "s.zarr", k.path) == []
    assert store.check(k) == "complete" and store.get(k) is not None


@pytest.mark.parametrize("damage", ["delete chunk", "flip byte"])
def test_precompute_repairs_broken_entries_it_would_skip(tmp_path, adapter, hf_bundle, damage):
    data = stack()
    tag = BundleTag.for_folder(hf_bundle, adapter.layout)
    path = tmp_path / "s.zarr"
    rep = precompute(StoreBackedEncoder(adapter, EmbeddingStore(path, tag)), refs(data))
    assert (rep.encoded, rep.repaired) == (4, 0)
    chunk = chunk_files(path, "cells/00002", "f1")[0]
    chunk.unlink() if damage == "delete chunk" else flip_byte(chunk)
    enc = StoreBackedEncoder(Counting(adapter), EmbeddingStore(path, tag))
    rep = precompute(enc, refs(data))
    assert (rep.encoded, rep.repaired, rep.skipped, enc.adapter.calls) == (1, 1, 3, 1)
    # the repaired entry holds the right features again, read back without encoding
    reader = StoreBackedEncoder(Counting(adapter), EmbeddingStore(path, tag, mode="r"))
    got = reader.embed(refs(data)[2])
    want = adapter.encode(reader.rgb(refs(data)[2]))
    for name, arr in want.features.items():
        np.testing.assert_array_equal(got.features[name], arr)
    assert reader.adapter.calls == 0 and reader.store.hits == 1


def test_the_widget_path_re_encodes_a_corrupt_entry(tmp_path, adapter, hf_bundle):
    data = stack()
    tag = BundleTag.for_folder(hf_bundle, adapter.layout)
    path = tmp_path / "s.zarr"
    precompute(StoreBackedEncoder(adapter, EmbeddingStore(path, tag)), refs(data))
    flip_byte(chunk_files(path, "cells/00003", "f0")[0])
    enc = StoreBackedEncoder(Counting(adapter), EmbeddingStore(path, tag))
    got = enc.embed(refs(data)[3])
    want = adapter.encode(enc.rgb(refs(data)[3]))
    np.testing.assert_array_equal(got.features["image_embeddings.0"],
                                  want.features["image_embeddings.0"])
    assert (enc.adapter.calls, enc.store.corrupt, enc.store.writes) == (1, 1, 1)
    assert enc.store.check(enc.entry_key(refs(data)[3], data[3])) == "complete"


def broken_store(path):
    """A store with one entry in each state (and a killed writer's leftover)."""
    store = EmbeddingStore(path, TAG)
    embs = {z: big_embedding(z) for z in range(5)}
    for z, emb in embs.items():
        store.put(EntryKey("cells", (z,), f"f{z}"), emb)
    chunk_files(path, "cells/00001")[0].unlink()                       # corrupt
    meta = store._root["cells/00002"].attrs[ENTRY_KEY]
    store._root["cells/00002"].attrs[ENTRY_KEY] = {**meta, "complete": False}  # incomplete
    sig = {**meta["signature"], "precision": "fp16"}
    store._root["cells/00003"].attrs[ENTRY_KEY] = {**meta, "signature": sig}   # foreign
    (path / "cells" / f"{TMP_PREFIX}00004-99-abc" / "f0").mkdir(parents=True)  # leftover
    return store


def test_verify_reports_every_state_and_repair_removes_the_broken(tmp_path):
    path = tmp_path / "s.zarr"
    broken_store(path)
    report = verify_store(path)
    states = {e.path: e.state for e in report.entries}
    assert states == {"cells/00000": EntryState.OK, "cells/00001": EntryState.CORRUPT,
                      "cells/00002": EntryState.INCOMPLETE, "cells/00003": EntryState.FOREIGN,
                      "cells/00004": EntryState.OK,
                      f"cells/{TMP_PREFIX}00004-99-abc": EntryState.INCOMPLETE}
    assert report.broken == 4 and report.removed == 0
    assert (path / "cells" / "00001").is_dir()  # nothing removed without --repair
    repaired = verify_store(path, repair=True)
    assert repaired.removed == 4
    after = verify_store(path)
    assert [(e.path, e.state) for e in after.entries] == [("cells/00000", "ok"),
                                                         ("cells/00004", "ok")]
    assert sorted(p.name for p in (path / "cells").iterdir()) == ["00000", "00004", "zarr.json"]
    got = EmbeddingStore(path, TAG).get(EntryKey("cells", (4,), "f4"))
    np.testing.assert_array_equal(got.features["big"], big_embedding(4).features["big"])


def test_store_verify_command(tmp_path, capsys):
    path = tmp_path / "s.zarr"
    broken_store(path)
    assert main(["store", "verify", str(path)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["ok", "cells/00000"]
    assert lines[1].startswith("corrupt ") and "cells/00001" in lines[1]
    assert "checksum" in lines[1]
    assert lines[2].startswith("incomplete ") and "never marked complete" in lines[2]
    assert lines[3].startswith("foreign bundle ") and "precision 'fp16'" in lines[3]
    assert "interrupted writer" in lines[5]
    assert "6 entries" in out and "2 ok, 2 incomplete, 1 corrupt, 1 foreign bundle" in out
    assert "--repair" in out
    assert main(["store", "verify", str(path), "--repair"]) == 0
    assert "removed 4 broken entries" in capsys.readouterr().out
    assert main(["store", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 entries" in out and "2 ok, 0 incomplete, 0 corrupt, 0 foreign bundle" in out
    (tmp_path / "plain").mkdir()
    assert main(["store", "verify", str(tmp_path / "plain")]) == 2
    err = capsys.readouterr().err
    assert "No embedding store" in err and "Traceback" not in err
