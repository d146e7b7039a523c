"""benchmarks/encoder.py: interleaved encoder sessions in fresh processes (no speed asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("onnx")


def test_encoder_benchmark_interleaves_and_reports_each_variant(tmp_path):
    from napari_sam3_onnx.testing.nso import build_nso

    a = build_nso(tmp_path / "a", concepts=False, memory=False)
    b = build_nso(tmp_path / "b", concepts=False, memory=False)
    out = tmp_path / "enc.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "encoder.py"), str(a),
                           str(b), "--reps", "3", "--threads", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["complete"] is True
    order = [(m["rep"], m["bundle"]) for m in doc["measurements"]]
    # round-robin with the order rotated every repetition
    assert order == [(0, str(a)), (0, str(b)), (1, str(b)), (1, str(a)), (2, str(a)),
                     (2, str(b))]
    rows = {r["bundle"]: r for r in doc["rows"]}
    assert rows[str(a)]["ratio_to_first"] == 1.0
    for r in rows.values():
        assert r["reps"] == 3 and r["median_s"] > 0 and r["peak_rss_gb"] > 0.01
        assert r["ratio_iqr"][0] <= r["ratio_to_first"] <= r["ratio_iqr"][1]
    assert proc.stdout.count("rep ") >= 6  # each measurement printed as it came


def test_memory_attention_case_runs_the_full_bank_shapes(tmp_path):
    """``--graph memory_attention``: 7 memories + 16 pointers fed at the graph's own sizes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from encoder import memory_attention_feed

    from napari_sam3_onnx.testing.nso import build_nso

    feed = memory_attention_feed({"trk_feat_2": [1, 256, 72, 72],
                                  "memory_feats": ["num_memories", 64, 72, 72],
                                  "pointers": ["num_pointers", 256]}, 7, 16)
    assert feed["memory_feats"].shape == (7, 64, 72, 72) and feed["pointers"].shape == (16, 256)
    # the conditioning slice at SAM 3's last temporal row, then the six recent ones
    assert feed["memory_rows"].tolist() == [6, 0, 1, 2, 3, 4, 5]
    assert np.allclose(feed["pointer_tpos"] * 15, [15, *list(range(1, 16))])
    a = build_nso(tmp_path / "a", concepts=False)
    out = tmp_path / "ma.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "encoder.py"), str(a),
                           "--graph", "memory_attention", "--memories", "3", "--pointers", "2",
                           "--reps", "2", "--threads", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["graph"] == "memory_attention" and doc["complete"] is True
    assert [m["bundle"] for m in doc["measurements"]] == [str(a), str(a)]
    assert all(m["checksum"] > 0 for m in doc["measurements"])


def test_language_encoder_case_reports_load_and_memory(tmp_path):
    from napari_sam3_onnx.testing.nso import build_nso

    a = build_nso(tmp_path / "a", memory=False)
    out = tmp_path / "lang.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "encoder.py"), str(a),
                           "--graph", "language_encoder", "--reps", "1", "--threads", "1",
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    row = doc["rows"][0]
    assert doc["graph"] == "language_encoder" and row["load_s"] > 0 and row["peak_rss_gb"] > 0


def test_one_bundle_on_both_runtimes_side_by_side_with_output_errors(tmp_path):
    """``BUNDLE@ort BUNDLE@ov-f32 --compare``: the CPU's flags, the format, OpenVINO's error."""
    pytest.importorskip("openvino")
    from napari_sam3_onnx.testing.nso import build_nso

    a = build_nso(tmp_path / "a", concepts=False, memory=False)
    out = tmp_path / "enc.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "encoder.py"), f"{a}@ort",
                           f"{a}@ov-f32", "--reps", "1", "--threads", "1", "--compare",
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("CPU ") and f"{a}@ov-f32: fp32" in proc.stdout
    doc = json.loads(out.read_text())
    rows = {r["bundle"]: r for r in doc["rows"]}
    assert rows[f"{a}@ort"]["max_rel_error"] == 0.0
    assert 0.0 <= rows[f"{a}@ov-f32"]["max_rel_error"] < 1e-4
    assert rows[f"{a}@ov-f32"]["min_cosine"] > 0.9999
    assert "vnni" in doc["machine"] and "bf16" in doc["machine"]
    assert not list(tmp_path.glob("encoder-outputs-*"))
