"""benchmarks/encoder.py: interleaved encoder sessions in fresh processes (no speed asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
