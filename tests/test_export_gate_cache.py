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
        return {"features": {"f": np.full((2, 3), float(len(calls)))},
                **{stage: [] for stage in gate.STAGES}}

    monkeypatch.setattr(gate, "decisions", fake_decisions)
    a = _bundle(tmp_path / "a", b"weights-a")
    cache = tmp_path / "ref.npz"
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


def _realistic_decisions() -> dict:
    """The shapes and types ``gate.decisions`` returns, on asymmetric sizes."""
    rng = np.random.default_rng(3)
    mask = rng.random((37, 53)) > 0.5
    return {
        "features": {"vision_features": rng.standard_normal((1, 4, 6, 9)).astype(np.float32)},
        "clicks": [{"candidate": np.int64(2), "mask": mask, "logits": rng.random((1, 7, 5))},
                   {"candidate": 0, "mask": ~mask, "logits": rng.random((1, 7, 5))}],
        "concepts": [{"scores": rng.random(11).astype(np.float32),
                      "masks": {7: (mask[:5], rng.random((5, 3))), 10: (mask[:2], np.zeros(2))}},
                     {"scores": np.zeros(0, np.float32), "masks": {}}],
        "propagation": [(mask, rng.random((4, 6))) for _ in range(3)],
    }


def _assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    else:
        assert a == b


def test_cache_round_trip_keeps_every_array_key_and_type(tmp_path):
    from napari_sam3_onnx.export import decision_cache

    original = _realistic_decisions()
    path = tmp_path / "ref.npz"
    decision_cache.save(path, {"image_encoder.onnx": "ab12"}, original)
    key, back = decision_cache.load(path)
    assert key == {"image_encoder.onnx": "ab12"}
    _assert_same(original, back)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.npz"]  # no temporary left


def test_a_file_that_is_not_a_cache_is_refused_and_left_alone(tmp_path, monkeypatch):
    import pickle

    from napari_sam3_onnx.export import decision_cache

    monkeypatch.setattr(gate, "decisions", lambda folder: _realistic_decisions())
    a = _bundle(tmp_path / "a", b"weights-a")
    for name, content in (("notes.txt", b"my measurements, keep\n"),
                          ("old.pkl", pickle.dumps({"key": {}, "decisions": {}})),
                          ("other.npz", None)):
        path = tmp_path / name
        if content is None:
            np.savez(path, labels=np.arange(6).reshape(2, 3))
            content = path.read_bytes()
        else:
            path.write_bytes(content)
        try:
            gate.cached_decisions(a, path)
        except decision_cache.NotADecisionCache as exc:
            assert name in str(exc)
        else:
            raise AssertionError(f"{name} was taken for a cache")
        assert path.read_bytes() == content
        assert "left as it is" in decision_cache.check_writable(path)
    assert decision_cache.check_writable(tmp_path / "new.npz") is None
    assert "does not exist" in decision_cache.check_writable(tmp_path / "no" / "ref.npz")


def test_a_failed_save_keeps_the_previous_cache(tmp_path):
    from napari_sam3_onnx.export import decision_cache

    path = tmp_path / "ref.npz"
    decision_cache.save(path, {"k": "1"}, {"features": {"f": np.ones((2, 3))}})
    before = path.read_bytes()
    bad = {"features": {"f": np.array([object()], dtype=object)}}
    try:
        decision_cache.save(path, {"k": "2"}, bad)
    except TypeError:
        pass
    else:
        raise AssertionError("an object array was cached")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.npz"]


def test_precision_command_refuses_a_foreign_cache_before_any_work(tmp_path):
    import pytest

    from napari_sam3_onnx.export import precision

    a = _bundle(tmp_path / "a", b"weights-a")
    foreign = tmp_path / "results.csv"
    foreign.write_text("id,area\n1,20\n")
    out = tmp_path / "out"
    for argv in ([str(a), str(out), "--precision", "int8", "--reference-cache", str(foreign)],
                 [str(a), str(out), "--precision", "int8", "--int8-candidates", "custom",
                  "--reference-cache", str(foreign)]):
        with pytest.raises(SystemExit) as exc:
            precision.main(argv)
        assert exc.value.code == 2
        assert not out.exists() and foreign.read_text() == "id,area\n1,20\n"
    with pytest.raises(SystemExit) as exc:
        gate.main([str(a), str(a), "--reference-cache", str(foreign)])
    assert exc.value.code == 2 and foreign.read_text() == "id,area\n1,20\n"


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    import os

    import pytest

    from napari_sam3_onnx.export import manifest

    path = tmp_path / "gate.json"
    path.write_text('{"old": true}\n')

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        manifest.write_atomically(path, b'{"new": true}\n')
    assert path.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gate.json"]
    monkeypatch.undo()
    manifest.write_atomically(path, b'{"new": true}\n')
    assert path.read_text() == '{"new": true}\n'
