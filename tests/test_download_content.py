"""Downloads certify no garbage, in any file (issue 29, item 3).

An error page, an error body or half a file saved under a bundle file's name must be refused
before anything is recorded, whatever the file is: external data is checked against the
offsets and lengths the graph's header references, JSON against what the adapter reads from
it. And ``fetch --dest`` must not take a file that was already in the folder for the download.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fake_hub import FakeHub
from napari_sam3_onnx.models.download import RECORD_NAME, download_bundle, verify_folder
from napari_sam3_onnx.models.errors import ContentMismatchError
from napari_sam3_onnx.models.registry import get_bundle
from test_download import make_spec, path_of, serve

SRC = Path(__file__).parent.parent / "src"
HTML = "<!DOCTYPE html><html><head><title>Error</title></head><body>oops</body></html>"
BAD_BODIES = {
    "html-comment-first": b"<!-- served by a proxy -->\n<html><body>Sign in</body></html>",
    "body-fragment": b"  <body><h1>502 Bad Gateway</h1></body>",
    "script-page": b"<script>window.location = '/login';</script>",
    "utf16-html": HTML.encode("utf-16"),
    "plain-text": b"Internal Server Error: the upstream timed out\n",
    "json-error": b'{"error": "Repository Not Found"}',
}


def graph_with_external_data(folder: Path, location: str, n: int = 4096) -> tuple[bytes, bytes]:
    """``enc.onnx`` (y = x + w) keeping ``w`` in ``location``; returns both files' bytes."""
    w = numpy_helper.from_array(np.linspace(-1, 1, n, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [w])
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save_model(helper.make_model(graph), str(folder / "enc.onnx"),
                    save_as_external_data=True, location=location, size_threshold=0)
    return (folder / "enc.onnx").read_bytes(), (folder / location).read_bytes()


@pytest.fixture
def hub():
    server = FakeHub()
    server.lfs = False  # an error page comes from the web server, not from LFS storage
    yield server
    server.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "models" / "test-bundle"


def _refused(spec, hub, folder: Path, name: str) -> str:
    with pytest.raises(ContentMismatchError) as info:
        download_bundle(spec, endpoint=hub.endpoint, retry_wait=0)
    assert not (folder / name).exists()
    records = json.loads((folder / RECORD_NAME).read_text()) if (
        folder / RECORD_NAME).exists() else {}
    assert name not in records
    return str(info.value)


@pytest.mark.parametrize("location", ["enc.onnx_data", "enc.onnx.data", "enc.weights"])
@pytest.mark.parametrize("body", [*BAD_BODIES, "cut-in-half"])
def test_a_bad_external_data_file_is_refused(hub, home, tmp_path, location, body):
    enc, data = graph_with_external_data(tmp_path / "export", location)
    bad = data[: len(data) // 2] if body == "cut-in-half" else BAD_BODIES[body]
    # the data listed first: the graph is still fetched first, to check the data against it
    spec = make_spec([serve(hub, location, bad, published_hash=False),
                      serve(hub, "enc.onnx", enc, published_hash=False)])
    message = _refused(spec, hub, home, location)
    assert location in message
    hub.files[path_of(location)] = data  # the server is fixed: the real file passes
    download_bundle(spec, endpoint=hub.endpoint, retry_wait=0)
    assert (home / location).read_bytes() == data and verify_folder(spec, home) == []


@pytest.mark.parametrize("junk", [b'{"error": "Entry not found"}',
                                  b'{"message": "rate limited", "status": 429}',
                                  b'{"image_mean": [0.5, 0.5, 0.5]}', b"[0.5, 0.5]"])
def test_a_constants_json_without_what_the_adapter_reads_is_refused(hub, home, junk):
    spec = make_spec([serve(hub, "constants.json", junk, published_hash=False)])
    _refused(spec, hub, home, "constants.json")


def test_a_tokenizer_json_error_body_is_refused(hub, home):
    spec = make_spec([serve(hub, "tokenizer.json", b'{"error": "Access denied"}',
                            published_hash=False)])
    assert "error message" in _refused(spec, hub, home, "tokenizer.json")


def test_doctor_finds_a_truncated_data_file_placed_by_hand(tmp_path):
    _, data = graph_with_external_data(tmp_path / "b", "enc.onnx_data")
    (tmp_path / "b" / "enc.onnx_data").write_bytes(data[:100])
    spec = make_spec([_spec_file("enc.onnx"), _spec_file("enc.onnx_data")])
    problems = verify_folder(spec, tmp_path / "b", check_hashes=False)
    assert [(p.file, p.kind) for p in problems] == [("enc.onnx_data", "content")]
    assert "needs" in str(problems[0])


def _spec_file(name):
    from napari_sam3_onnx.models.registry import FileSpec

    return FileSpec(name, f"https://example.invalid/{name}")


@pytest.fixture
def served(hf_bundle, tmp_path):
    """A fake Hub serving the hf-tracker files."""
    hub = FakeHub()
    for f in get_bundle("hf-tracker").files:
        local = hf_bundle / f.name
        data = local.read_bytes() if local.is_file() else bytes(range(256)) * 5
        hub.files[f.url.removeprefix("https://huggingface.co")] = data
    yield hub
    hub.close()


def test_fetch_dest_never_takes_another_models_file_for_the_download(served, tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    theirs = b"\x08\x07another model's decoder" + bytes(range(200))
    (dest / "prompt_encoder_mask_decoder.onnx_data").write_bytes(theirs)
    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HOME": str(tmp_path / "hf"),
           "NAPARI_SAM3_ONNX_HOME": str(tmp_path / "home")}
    env.pop("HF_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "napari_sam3_onnx.cli", "fetch", "hf-tracker",
                           "--dest", str(dest), "--endpoint", served.endpoint],
                          capture_output=True, text=True, env=env, timeout=300)
    err = done.stderr
    assert done.returncode == 2 and "Traceback" not in err, err
    assert len([ln for ln in err.splitlines() if "error:" in ln]) == 1, err
    assert "prompt_encoder_mask_decoder.onnx_data was already there" in err
    assert (dest / "prompt_encoder_mask_decoder.onnx_data").read_bytes() == theirs
    records = json.loads((dest / RECORD_NAME).read_text())
    assert "prompt_encoder_mask_decoder.onnx_data" not in records
    assert not (dest / ".hf-download").exists()


def test_doctor_fails_a_registered_bundle_with_half_its_weights(hf_bundle, tmp_path):
    import shutil

    root = tmp_path / "root"
    folder = root / "hf-tracker"
    shutil.copytree(hf_bundle, folder)
    for f in get_bundle("hf-tracker").files:
        if not (folder / f.name).exists():
            (folder / f.name).write_bytes(bytes(range(256)) * 5)  # binary stand-in
    data = folder / "vision_encoder.onnx_data"
    whole = data.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(SRC), "NAPARI_SAM3_ONNX_HOME": str(tmp_path / "h")}
    command = [sys.executable, "-m", "napari_sam3_onnx.cli", "doctor", "--root", str(root),
               "--strict"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "hf-tracker: ok" in done.stdout, done.stdout + done.stderr
    data.write_bytes(whole[: len(whole) // 2])
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "vision_encoder.onnx_data" in done.stdout and "needs" in done.stdout, done.stdout
