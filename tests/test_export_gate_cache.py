"""The gate's fp32 reference cache: reused for the same bundle, never for a changed one."""

from __future__ import annotations

import json

import numpy as np

from napari_sam3_onnx.export import gate


def _bundle(folder, weights: bytes):
    from napari_sam3_onnx.export.manifest import write_manifest

    folder.mkdir()
    (folder / "image_encoder.onnx").write_bytes(weights)
    write_manifest(folder, {"layout": "nso-sam3", "files": {"image_encoder.onnx": {}}})
    return folder


def test_reference_cache_is_keyed_by_the_bundles_digests(tmp_path, monkeypatch):
    calls = []

    def fake_decisions(folder):
        calls.append(folder)
        return {"features": {"f": np.full((2, 3), float(len(calls)))}}

    monkeypatch.setattr(gate, "decisions", fake_decisions)
    a = _bundle(tmp_path / "a", b"weights-a")
    cache = tmp_path / "ref.pkl"
    first = gate.cached_decisions(a, cache)
    again = gate.cached_decisions(a, cache)
    assert len(calls) == 1 and cache.is_file()
    assert np.array_equal(first["features"]["f"], again["features"]["f"])
    # the same folder with other weights: recomputed, not the stale decisions
    (a / "image_encoder.onnx").write_bytes(b"weights-b")
    manifest = json.loads((a / "manifest.json").read_text())
    from napari_sam3_onnx.export.manifest import write_manifest
    write_manifest(a, manifest)
    fresh = gate.cached_decisions(a, cache)
    assert len(calls) == 2 and fresh["features"]["f"][0, 0] == 2.0
    assert gate.cached_decisions(a, None)["features"]["f"][0, 0] == 3.0  # no cache: computed
