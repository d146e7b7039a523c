"""benchmarks/run.py --quick --no-gui runs and reports every engine case (no speed asserted)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE_CASES = {"encode", "memory/plane", "click-engine", "text-stack", "propagation",
                "propagation-memory"}

pytest.importorskip("onnx")


@pytest.mark.slow  # > 5 s (subprocesses); docs/contributing.md
def test_quick_benchmark_writes_every_case(tmp_path):
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--no-gui",
         "--json", str(out), "--markdown", str(md)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert {r["case"] for r in rows} == ENGINE_CASES
    assert doc["environment"]["onnxruntime"]
    for r in rows:
        if r["ratio"] is not None:
            assert math.isfinite(r["ratio"]) and r["ratio"] > 0 and r["reps"] >= 1
            assert r["status"] in ("PASS", "MISS")
    text = [r for r in rows if r["case"] == "text-stack"]
    assert text and all(r["extra"]["language_calls"] == 1 for r in text)
    layouts = {r["layout"] for r in rows if r["case"] == "encode"}
    assert len(layouts) == 11
    assert "| case |" in md.read_text()
    assert "ratio" in proc.stdout
    # rows stream out as they are measured, with progress, and the JSON says it finished
    assert doc["args"]["complete"] is True
    progress = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    assert any("bundle 1/" in line for line in progress)
    assert sum(" encode " in f" {line} " for line in progress) == len(layouts)


@pytest.mark.slow  # > 5 s (subprocesses); docs/contributing.md
def test_cases_option_runs_only_the_cases_named(tmp_path):
    """``--cases`` keeps a full-depth run short: encode always, then only what is named."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--no-gui",
         "--cases", "click-engine", "--json", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {r["case"] for r in json.loads(out.read_text())["rows"]} == {"encode", "click-engine"}
    bad = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--cases", "encoding"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2 and "unknown --cases" in bad.stderr


def test_propagation_steps_reports_each_slice_and_the_full_bank(tmp_path):
    """benchmarks/propagation_steps.py on the toy bundle: one row per slice, the bank growing
    to SAM 3's 7 memories and 16 pointers (no speed asserted)."""
    from napari_sam3_onnx.testing.nso import build_nso

    bundle = build_nso(tmp_path / "nso")
    out = tmp_path / "steps.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "propagation_steps.py"), str(bundle),
         "--slices", "18", "--size", "300", "260", "--json", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    tracked = [r for r in doc["rows"] if not r["seed"] and r["slice"] > 0]
    assert [r["slice"] for r in tracked] == list(range(1, 18))
    assert [(r["memories"], r["pointers"]) for r in tracked[:3]] == [(1, 1), (2, 2), (3, 3)]
    assert (tracked[-1]["memories"], tracked[-1]["pointers"]) == (7, 16)
    assert all("memory_attention" in r["graphs_s"] for r in tracked)
    assert "bank full on 2 slice(s)" in proc.stdout
