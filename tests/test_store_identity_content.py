"""The store's bundle identity covers every file the adapter reads, by content (issue 29.2).

A bundle changed in place must never be taken for the one a store was made with: not when the
file's modification time is set back (``touch -r``), not when ``manifest.json`` records the old
SHA-256, not for external data with an unusual name, and not for ``constants.json`` (another
normalisation gives other embeddings).
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.engine.store import bundle_digest as bd
from napari_sam3_onnx.engine.store.embedding_store import StoreMismatchError
from napari_sam3_onnx.testing.jax_video import build_jax_video


def _rewrite_keeping_times(path, data: bytes) -> None:
    """Replace the bytes of ``path`` (same size) and set its times back, as ``touch -r`` does."""
    st = path.stat()
    assert len(data) == st.st_size
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


@pytest.fixture
def bundle(hf_bundle, tmp_path):
    folder = tmp_path / "b"
    shutil.copytree(hf_bundle, folder, ignore=shutil.ignore_patterns(bd.CACHE_NAME))
    return folder


def test_a_change_with_the_old_mtime_restored_changes_the_digest(bundle):
    first = bd.bundle_digest(bundle)  # now cached
    data = bundle / "vision_encoder.onnx_data"
    _rewrite_keeping_times(data, (np.fromfile(data, np.float32) * 2).tobytes())
    assert bd.bundle_digest(bundle) != first


def test_a_manifest_recording_the_old_hash_is_not_trusted(bundle):
    files = {p.name: {"sha256": bd.sha256_file(p), "bytes": p.stat().st_size}
             for p in bd.weight_files(bundle)}
    (bundle / "manifest.json").write_text(json.dumps({"files": files}))
    first = bd.bundle_digest(bundle)
    (bundle / bd.CACHE_NAME).unlink()
    data = bundle / "vision_encoder.onnx_data"
    old = (bundle / "manifest.json").stat().st_mtime_ns - 10**9  # older than the manifest
    data.write_bytes((np.fromfile(data, np.float32) * 3).tobytes())
    os.utime(data, ns=(old, old))
    assert bd.bundle_digest(bundle) != first


@pytest.mark.parametrize("name", ["vision_encoder.weights", "constants.json", "tokenizer.json",
                                  "weights.pb", "merges.txt"])
def test_every_file_an_adapter_may_read_is_part_of_the_identity(bundle, name):
    (bundle / name).write_text('{"image_mean": [0.5, 0.5, 0.5]}')
    first = bd.bundle_digest(bundle)
    _rewrite_keeping_times(bundle / name, b'{"image_mean": [0.4, 0.5, 0.5]}')
    assert bd.bundle_digest(bundle) != first


def test_notes_and_our_own_records_are_not(bundle):
    first = bd.bundle_digest(bundle)
    (bundle / "README.md").write_text("my notes")
    (bundle / ".sha256-first-download.json").write_text("{}")
    assert bd.bundle_digest(bundle) == first


def test_other_constants_never_read_the_old_embeddings(tmp_path):
    folder = build_jax_video(tmp_path / "jax")
    data = np.stack([np.full((40, 56), 900 + 300 * z, np.uint16) for z in range(2)])
    data[:, 10:25, 12:30] += 1500
    store = tmp_path / "s.zarr"
    api.precompute(api.open_bundle(folder), data, store, window=(0, 3000))
    path = folder / "constants.json"
    consts = json.loads(path.read_text())
    consts["image_mean"] = [v * 0.5 for v in consts["image_mean"]]
    st = path.stat()
    path.write_text(json.dumps(consts, indent=1))  # another normalisation, old time set back
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(StoreMismatchError):
        api.segment(api.open_bundle(folder), data, [[15, 20]], index=(1,), window=(0, 3000),
                    store=store)
