"""`fetch` on the command line: one line on stderr for every failure, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_hub import FakeHub
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.models.registry import get_bundle

SRC = Path(__file__).resolve().parents[1] / "src"


def test_an_endpoint_that_is_not_a_url_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HOME": str(tmp_path / "hf"),
           "NAPARI_SAM3_ONNX_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "napari_sam3_onnx.cli", "fetch", "hf-tracker", "--endpoint",
         "notaurl"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'notaurl' is not a URL" in lines[0]
    assert not (tmp_path / "home").exists()  # refused before anything was created


@pytest.fixture
def served(hf_bundle, tmp_path, monkeypatch):
    """A fake Hub serving the hf-tracker files; the plugin's home in a temporary folder."""
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    hub = FakeHub()
    for f in get_bundle("hf-tracker").files:
        local = hf_bundle / f.name
        data = local.read_bytes() if local.is_file() else bytes(range(256)) * 5  # binary
        hub.files[f.url.removeprefix("https://huggingface.co")] = data
    yield hub
    hub.close()


def test_403_with_a_token_names_the_repository_in_one_line(served, capsys):
    served.status["*"] = 403
    code = main(["fetch", "hf-tracker", "--endpoint", served.endpoint, "--token", "hf_x"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "onnx-community/sam3-tracker-ONNX" in err and "no access" in err


def test_an_html_page_as_a_model_file_is_one_line_and_nothing_is_certified(served, tmp_path,
                                                                          capsys):
    path = next(p for p in served.files if p.endswith("/vision_encoder.onnx"))
    served.files[path] = b"<!DOCTYPE html><html><body>Please sign in</body></html>"
    code = main(["fetch", "hf-tracker", "--endpoint", served.endpoint])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "vision_encoder.onnx" in err and "HTML" in err
    folder = tmp_path / "home" / "models" / "hf-tracker"
    assert not (folder / "vision_encoder.onnx").exists()
    code = main(["doctor"])
    assert "hf-tracker: " in capsys.readouterr().out and code == 0


def test_hf_home_hf_endpoint_and_offline_work_as_environment_variables(served, tmp_path):
    """A fresh process reads them as huggingface_hub does: at import, from the environment."""
    spec = get_bundle("hf-tracker")
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HOME": str(tmp_path / "hf"),
           "HF_ENDPOINT": served.endpoint, "NAPARI_SAM3_ONNX_HOME": str(tmp_path / "home")}
    env.pop("HF_TOKEN", None)
    command = [sys.executable, "-m", "napari_sam3_onnx.cli", "fetch", "hf-tracker"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    snapshot = (tmp_path / "hf" / "hub" / "models--onnx-community--sam3-tracker-ONNX" /
                "snapshots" / spec.revision / "onnx")
    folder = tmp_path / "home" / "models" / "hf-tracker"
    for f in spec.files:
        assert (folder / f.name).resolve() == (snapshot / f.name).resolve()
        assert (snapshot / f.name).is_file()
        (folder / f.name).unlink()
    served.close()  # the Hub is gone: offline mode serves the cache
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**env, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert all((folder / f.name).is_file() for f in spec.files)


def test_a_server_that_trickles_bytes_ends_in_one_error_not_a_hang(served, tmp_path):
    """A byte every 0.2 s passes every read timeout; the stall window (3 x the library's
    HF_HUB_DOWNLOAD_TIMEOUT, 1 s here) ends it, after the library's own resumed retries."""
    for path in served.files:
        served.files[path] = b"x" * 50_000
        served.trickle[path] = 0.2
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HOME": str(tmp_path / "hf"),
           "HF_ENDPOINT": served.endpoint, "NAPARI_SAM3_ONNX_HOME": str(tmp_path / "home"),
           "HF_HUB_DOWNLOAD_TIMEOUT": "1"}
    env.pop("HF_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "napari_sam3_onnx.cli", "fetch", "hf-tracker",
                           "-q"], capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "stalled" in errors[0], done.stderr[-3000:]
    folder = tmp_path / "home" / "models" / "hf-tracker"
    assert not folder.exists() or not any(p.suffix == ".onnx" for p in folder.iterdir())
