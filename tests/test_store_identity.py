"""A store belongs to one bundle (by file content) and one precision; others are refused."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.store import bundle_digest as bd
from napari_sam3_onnx.engine.store.embedding_store import (
    BundleTag,
    EmbeddingStore,
    StoreMismatchError,
)


def stack(n=3, shape=(60, 90)):
    return np.stack([blob_image(shape, ((20 + z, 15 + 14 * z, 6),), value=1000 + 600 * z,
                                dtype=np.uint16) for z in range(n)])


@pytest.fixture
def twins(hf_bundle, tmp_path):
    """Two copies of the test bundle, equal names and sizes; the second's weights halved."""
    a, b = tmp_path / "exp-a", tmp_path / "exp-b"
    for dst in (a, b):
        shutil.copytree(hf_bundle, dst, ignore=shutil.ignore_patterns(bd.CACHE_NAME))
    data = b / "vision_encoder.onnx_data"
    (np.fromfile(data, np.float32) * 0.5).astype(np.float32).tofile(data)
    assert [(p.name, p.stat().st_size) for p in bd.weight_files(a)] == \
        [(p.name, p.stat().st_size) for p in bd.weight_files(b)]
    return a, b


@pytest.fixture
def hashes(monkeypatch):
    """Count the files really hashed."""
    seen = []
    real = bd.sha256_file

    def counting(path, *a, **kw):
        seen.append(path.name)
        return real(path, *a, **kw)

    monkeypatch.setattr(bd, "sha256_file", counting)
    return seen


def test_a_re_export_with_equal_sizes_never_reads_the_other_bundles_store(twins, tmp_path):
    a, b = (api.open_bundle(p) for p in twins)
    assert a.tag.weights != b.tag.weights and a.tag.layout == b.tag.layout
    data = stack()
    store = tmp_path / "s.zarr"
    api.precompute(a, data, store, window=(0, 3000))
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    with pytest.raises(StoreMismatchError) as err:
        api.segment(b, data, [[35, 50]], index=(1,), window=(0, 3000), store=store)
    assert "exp-a" in str(err.value) and "exp-b" in str(err.value)
    assert "--replace-store" in str(err.value)
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    # read through their own stores, the two bundles give different features
    ea = api.precompute(a, data, tmp_path / "a.zarr", window=(0, 3000))
    eb = api.precompute(b, data, tmp_path / "b.zarr", window=(0, 3000))
    assert ea.encoded == eb.encoded == 3
    fa, fb = (_stored(bundle, tmp_path / name, data, 1)
              for bundle, name in ((a, "a.zarr"), (b, "b.zarr")))
    assert not np.allclose(fa.features["image_embeddings.0"], fb.features["image_embeddings.0"])


def _stored(bundle, store, data, z):
    from napari_sam3_onnx.engine.encoding import SliceRef

    enc = bundle.encoder(bundle.open_store(store, mode="r"))
    return enc.store.get(enc.entry_key(SliceRef(data, (z,), window=(0.0, 3000.0),
                                                source="image"), data[z]))


def test_a_renamed_copy_is_the_same_bundle(twins, tmp_path):
    a, _ = twins
    c = tmp_path / "renamed"
    shutil.copytree(a, c)
    assert BundleTag.for_folder(a, "hf-tracker").weights == \
        BundleTag.for_folder(c, "hf-tracker").weights


def test_the_digest_is_computed_once_and_again_after_a_change(twins, hashes):
    a, _ = twins
    first = bd.bundle_digest(a)
    assert sorted(hashes) == [p.name for p in bd.weight_files(a)]
    assert (a / bd.CACHE_NAME).is_file()
    hashes.clear()
    assert bd.bundle_digest(a) == first and hashes == []
    data = a / "vision_encoder.onnx_data"  # same size, new bytes, new mtime
    (np.fromfile(data, np.float32) * 2).astype(np.float32).tofile(data)
    os.utime(data, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns + 10**9))
    assert bd.bundle_digest(a) != first and hashes == ["vision_encoder.onnx_data"]


def test_a_read_only_bundle_caches_its_digest_in_the_data_folder(twins, hashes, tmp_path,
                                                                 monkeypatch):
    a, _ = twins
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    os.chmod(a, 0o555)
    try:
        if os.access(a, os.W_OK):  # root writes anyway: refuse writes into the folder by hand
            from napari_sam3_onnx.models import atomic

            real = atomic.new_sibling

            def refuse(path, *args, **kw):
                if os.path.samefile(path.parent, a):
                    raise PermissionError(13, "Permission denied", str(path.parent))
                return real(path, *args, **kw)

            monkeypatch.setattr(atomic, "new_sibling", refuse)
        first = bd.bundle_digest(a)
        hashes.clear()
        assert bd.bundle_digest(a) == first and hashes == []
        assert not (a / bd.CACHE_NAME).exists()
        assert list((tmp_path / "home" / "digests").glob("exp-a-*.json"))
    finally:
        os.chmod(a, 0o755)


def test_precision_mismatch_is_refused_and_replace_store_starts_afresh(hf_bundle, tmp_path,
                                                                      capsys):
    import tifffile

    tif = tmp_path / "st.tif"
    tifffile.imwrite(tif, stack())
    store = tmp_path / "e.zarr"
    base = ["precompute", str(hf_bundle), str(tif), "--store", str(store), "--window", "0", "3000"]
    assert main([*base, "--fp16"]) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert main([*base, "--fp32"]) == 1
    err = capsys.readouterr().err
    assert "fp16" in err and "fp32" in err and "--replace-store" in err
    assert "Traceback" not in err
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert main([*base]) == 0 and "skipped 3" in capsys.readouterr().out  # its own precision
    assert main([*base, "--fp32", "--replace-store"]) == 0
    assert "encoded 3, skipped 0" in capsys.readouterr().out
    assert EmbeddingStore(store, api.open_bundle(hf_bundle).tag).precision == "fp32"
    assert main(["store", "verify", str(store)]) == 0
    assert "3 ok" in capsys.readouterr().out


def test_replace_keeps_files_that_are_not_entries(tmp_path):
    from napari_sam3_onnx.engine.store.embedding_store import EntryKey
    from napari_sam3_onnx.models.base import Embedding

    tag, other = BundleTag("x", "hf-tracker", "sha256:1"), BundleTag("y", "hf-tracker", "sha256:2")
    store = tmp_path / "s.zarr"
    emb = Embedding({"f": np.ones((2, 3), np.float32)}, (84, 84), (9, 9))
    EmbeddingStore(store, tag).put(EntryKey("cells", (0,), "f"), emb)
    (store / "README.txt").write_text("my notes")
    with pytest.raises(StoreMismatchError, match="holds 1 embedding"):
        EmbeddingStore(store, other)
    replaced = EmbeddingStore(store, other, replace=True)
    assert replaced.images() == [] and (store / "README.txt").read_text() == "my notes"
    replaced.put(EntryKey("cells", (0,), "f"), emb)
    with pytest.raises(StoreMismatchError):
        EmbeddingStore(store, tag)


def test_an_empty_store_of_another_bundle_is_simply_adopted(tmp_path):
    EmbeddingStore(tmp_path / "s.zarr", BundleTag("x", "hf-tracker", "sha256:1"))
    st = EmbeddingStore(tmp_path / "s.zarr", BundleTag("y", "hf-tracker", "sha256:2"), "fp16")
    assert st.precision == "fp16"
    assert EmbeddingStore(tmp_path / "s.zarr", st.bundle).precision == "fp16"


def test_an_older_store_is_refused_unless_empty(tmp_path):
    import zarr

    tag = BundleTag("x", "hf-tracker", "sha256:1")
    old = {"format": "napari-sam3-onnx embedding store", "version": 1, "precision": "fp32"}
    for name, entries in (("empty.zarr", False), ("full.zarr", True)):
        root = zarr.open_group(str(tmp_path / name), mode="w", zarr_format=3)
        root.attrs["napari_sam3_onnx"] = old
        if entries:
            root.require_group("cells").require_group("00000")
    assert EmbeddingStore(tmp_path / "empty.zarr", tag).images() == []
    with pytest.raises(StoreMismatchError, match="older napari-sam3-onnx"):
        EmbeddingStore(tmp_path / "full.zarr", tag)
    EmbeddingStore(tmp_path / "full.zarr", tag, replace=True)
    assert EmbeddingStore(tmp_path / "full.zarr", tag).images() == []


def test_text_with_another_bundles_store_is_refused_before_any_work(hf_bundle, tmp_path,
                                                                     capsys):
    import tifffile

    from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
    from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

    wk = build_wkentaro_v03(tmp_path / "wk-bundle")
    write_toy_tokenizer(wk)
    tif = tmp_path / "st.tif"
    tifffile.imwrite(tif, stack())
    store = tmp_path / "hf.zarr"
    assert main(["precompute", str(hf_bundle), str(tif), "--store", str(store)]) == 0
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    capsys.readouterr()
    code = main(["text", str(wk), str(tif), "--concepts", "cell", "--out",
                 str(tmp_path / "l.tif"), "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "hf_tracker" in err and "wk-bundle" in err and "--replace-store" in err
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_replace_store_on_a_cluster(hf_bundle, tmp_path, capsys):
    pytest.importorskip("distributed")
    import tifffile

    tif = tmp_path / "st.tif"
    tifffile.imwrite(tif, stack())
    base = ["precompute", str(hf_bundle), str(tif), "--store", str(tmp_path / "c.zarr"),
            "--workers", "1", "--no-processes"]
    assert main([*base, "--fp16"]) == 0
    assert main([*base, "--fp32"]) == 1
    assert main([*base, "--fp32", "--replace-store"]) == 0
    assert "encoded 3, skipped 0" in capsys.readouterr().out
    report = api.verify_store(tmp_path / "c.zarr")
    assert report.count("ok") == 3 and "fp32" in report.identity
