from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from napari_sam3_onnx.models.download import (
    RECORD_NAME,
    download_bundle,
    sha256_file,
    verify_folder,
)
from napari_sam3_onnx.models.errors import (
    ChecksumMismatchError,
    DownloadError,
    GatedModelError,
    RecordedChecksumMismatchError,
    SizeMismatchError,
)
from napari_sam3_onnx.models.registry import BundleSpec, FileSpec

MIB = 1 << 20


def payload(n: int, seed: int = 0) -> bytes:
    """Deterministic, non-repeating bytes (so an offset error changes the hash)."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeHub:
    """A tiny HTTP server on 127.0.0.1 that serves bytes with Range support and can misbehave."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.cut_after: dict[str, list[int]] = {}  # path -> bytes sent by successive requests
        self.status: dict[str, int] = {}
        self.ignore_range = False
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                hub.requests.append((self.path, dict(self.headers.items())))
                if self.path in hub.status:
                    self.send_error(hub.status[self.path])
                    return
                data = hub.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and not hub.ignore_range:
                    start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cuts = hub.cut_after.get(self.path)
                if cuts:
                    self.wfile.write(body[: cuts.pop(0)])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub():
    server = FakeHub()
    yield server
    server.close()


def make_spec(files, gated=False, bundle_id="test-bundle") -> BundleSpec:
    return BundleSpec(
        id=bundle_id,
        title="Test bundle",
        layout="hf-tracker",
        files=tuple(files),
        source_repo="test/repo",
        revision="abc123",
        licence_name="SAM License",
        licence_url="https://example.invalid/LICENSE",
        capabilities=frozenset({"encode"}),
        precision="fp32",
        notes="Test notes.",
        gated=gated,
    )


def serve(hub: FakeHub, name: str, data: bytes, published_hash=True, size=None) -> FileSpec:
    path = f"/test/repo/resolve/abc123/{name}"
    hub.files[path] = data
    return FileSpec(name, hub.url(path), sha(data) if published_hash else None, size)


def range_headers(hub: FakeHub) -> list[str | None]:
    return [headers.get("Range") for _, headers in hub.requests]


def test_downloads_verifies_and_records_first_use_hashes(hub, tmp_path):
    a, b = payload(3 * MIB + 17, 1), payload(1000, 2)
    spec = make_spec(
        [
            serve(hub, "enc.onnx", a, size=len(a)),
            serve(hub, "enc.onnx.data", b, published_hash=False),
        ]
    )
    folder = download_bundle(spec, dest=tmp_path / "bundle", retry_wait=0)
    assert folder == tmp_path / "bundle"
    assert (folder / "enc.onnx").read_bytes() == a
    assert (folder / "enc.onnx.data").read_bytes() == b
    assert not list(folder.glob("*.part"))
    records = json.loads((folder / RECORD_NAME).read_text())
    assert records["enc.onnx.data"]["sha256"] == sha(b)
    assert records["enc.onnx.data"]["size"] == 1000
    assert "enc.onnx" not in records  # its hash is published, nothing to record
    assert verify_folder(spec, folder) == []


def test_progress_counts_increase_and_end_at_the_total(hub, tmp_path):
    data = payload(3 * MIB + 123)
    spec = make_spec([serve(hub, "big.onnx", data)])
    calls = []
    download_bundle(spec, dest=tmp_path, progress=lambda *c: calls.append(c), retry_wait=0)
    done = [d for name, d, _ in calls if name == "big.onnx"]
    assert len(done) >= 4
    assert all(later > earlier for earlier, later in itertools.pairwise(done))
    assert done[0] == 0 and done[-1] == len(data)
    assert {total for _, _, total in calls} == {len(data)}


def test_resumes_with_range_after_the_server_dies_mid_file(hub, tmp_path):
    data = payload(3 * MIB + 5, 3)
    spec = make_spec([serve(hub, "enc.onnx", data)])
    hub.cut_after["/test/repo/resolve/abc123/enc.onnx"] = [int(1.5 * MIB)]
    with pytest.raises(DownloadError):
        download_bundle(spec, dest=tmp_path, retries=0, retry_wait=0)
    part = tmp_path / "enc.onnx.part"
    kept = part.stat().st_size
    assert 0 < kept <= int(1.5 * MIB)
    assert not (tmp_path / "enc.onnx").exists()

    download_bundle(spec, dest=tmp_path, retries=0, retry_wait=0)
    assert range_headers(hub) == [None, f"bytes={kept}-"]
    assert sha256_file(tmp_path / "enc.onnx") == sha(data)
    assert not part.exists()


def test_retries_resume_within_one_call(hub, tmp_path):
    data = payload(2 * MIB + 9, 4)
    spec = make_spec([serve(hub, "enc.onnx", data)])
    hub.cut_after["/test/repo/resolve/abc123/enc.onnx"] = [MIB + 100, 10]
    download_bundle(spec, dest=tmp_path, retries=2, retry_wait=0)
    ranges = range_headers(hub)
    assert len(ranges) == 3 and ranges[0] is None
    assert all(r is not None and r.startswith("bytes=") for r in ranges[1:])
    assert sha256_file(tmp_path / "enc.onnx") == sha(data)


def test_server_ignoring_range_restarts_from_zero(hub, tmp_path):
    data = payload(MIB + 1, 5)
    spec = make_spec([serve(hub, "enc.onnx", data)])
    (tmp_path / "enc.onnx.part").write_bytes(b"stale bytes from elsewhere")
    hub.ignore_range = True
    download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert range_headers(hub) == ["bytes=26-"]
    assert (tmp_path / "enc.onnx").read_bytes() == data


def test_checksum_mismatch_raises_and_leaves_nothing_in_place(hub, tmp_path):
    data = payload(5000, 6)
    good = serve(hub, "enc.onnx", data)
    spec = make_spec([FileSpec(good.name, good.url, sha(b"something else"))])
    with pytest.raises(ChecksumMismatchError) as info:
        download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert info.value.actual == sha(data)
    assert info.value.expected == sha(b"something else")
    assert not (tmp_path / "enc.onnx").exists()
    assert not (tmp_path / "enc.onnx.part").exists()


def test_size_mismatch_raises_and_leaves_nothing_in_place(hub, tmp_path):
    data = payload(5000, 7)
    good = serve(hub, "enc.onnx", data)
    spec = make_spec([FileSpec(good.name, good.url, None, 4000)])
    with pytest.raises(SizeMismatchError):
        download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert not (tmp_path / "enc.onnx").exists()
    assert not (tmp_path / "enc.onnx.part").exists()


def test_no_network_names_url_folder_and_files(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/test/repo/resolve/abc123/enc.onnx"
    spec = make_spec(
        [FileSpec("enc.onnx", url, None), FileSpec("enc.onnx.data", url + ".data", None)]
    )
    folder = tmp_path / "models" / "test-bundle"
    with pytest.raises(DownloadError) as info:
        download_bundle(spec, dest=folder, retries=1, retry_wait=0, timeout=5)
    message = str(info.value)
    assert url in message
    assert str(folder) in message
    assert "enc.onnx, enc.onnx.data" in message
    assert not isinstance(info.value, GatedModelError)


def test_gated_without_token_fetches_nothing(hub, tmp_path):
    spec = make_spec([serve(hub, "enc.onnx", b"secret weights")], gated=True)
    folder = tmp_path / "gated"
    with pytest.raises(GatedModelError) as info:
        download_bundle(spec, dest=folder)
    message = str(info.value)
    assert "accept" in message and "token" in message
    assert str(folder) in message and "enc.onnx" in message
    assert hub.requests == []
    assert not folder.exists()


def test_gated_with_token_sends_it(hub, tmp_path):
    spec = make_spec([serve(hub, "enc.onnx", b"secret weights")], gated=True)
    download_bundle(spec, dest=tmp_path, token="hf_test", retry_wait=0)
    assert hub.requests[0][1].get("Authorization") == "Bearer hf_test"
    assert (tmp_path / "enc.onnx").read_bytes() == b"secret weights"


def test_hub_refusal_becomes_gated_error_and_404_names_the_url(hub, tmp_path):
    refused = serve(hub, "enc.onnx", b"x")
    hub.status["/test/repo/resolve/abc123/enc.onnx"] = 401
    with pytest.raises(GatedModelError):
        download_bundle(make_spec([refused]), dest=tmp_path, retry_wait=0)
    gone = FileSpec("gone.onnx", hub.url("/test/repo/resolve/abc123/gone.onnx"))
    with pytest.raises(DownloadError) as info:
        download_bundle(make_spec([gone]), dest=tmp_path, retry_wait=0)
    assert gone.url in str(info.value) and "404" in str(info.value)
    assert len(hub.requests) == 2  # neither error is retried


def test_server_errors_are_retried(hub, tmp_path):
    spec = make_spec([serve(hub, "enc.onnx", b"x")])
    hub.status["/test/repo/resolve/abc123/enc.onnx"] = 503
    with pytest.raises(DownloadError) as info:
        download_bundle(spec, dest=tmp_path, retries=2, retry_wait=0)
    assert "503" in str(info.value)
    assert len(hub.requests) == 3


def test_verified_files_are_skipped_and_damaged_ones_fetched_again(hub, tmp_path):
    a, b = payload(4000, 8), payload(3000, 9)
    spec = make_spec([serve(hub, "a.onnx", a), serve(hub, "b.onnx", b, published_hash=False)])
    download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert len(hub.requests) == 2
    calls = []
    download_bundle(spec, dest=tmp_path, progress=lambda *c: calls.append(c), retry_wait=0)
    assert len(hub.requests) == 2
    assert calls == [("a.onnx", 4000, 4000), ("b.onnx", 3000, 3000)]

    (tmp_path / "a.onnx").write_bytes(b"damaged")
    (tmp_path / "b.onnx").write_bytes(b"damaged too")
    problems = verify_folder(spec, tmp_path)
    assert [(p.file, p.kind) for p in problems] == [("a.onnx", "sha256"), ("b.onnx", "sha256")]
    download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert len(hub.requests) == 4
    assert (tmp_path / "a.onnx").read_bytes() == a
    assert (tmp_path / "b.onnx").read_bytes() == b


def test_a_changed_upstream_file_fails_its_first_download_record(hub, tmp_path):
    spec = make_spec([serve(hub, "b.onnx", b"version one", published_hash=False)])
    download_bundle(spec, dest=tmp_path, retry_wait=0)
    (tmp_path / "b.onnx").unlink()
    hub.files["/test/repo/resolve/abc123/b.onnx"] = b"version two"
    with pytest.raises(RecordedChecksumMismatchError) as info:
        download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert RECORD_NAME in str(info.value)
    assert not (tmp_path / "b.onnx").exists()


def test_unpublished_files_are_named_after_the_rest_is_fetched(hub, tmp_path):
    spec = make_spec([serve(hub, "enc.onnx", b"weights"), FileSpec("memory_encoder.onnx", "")])
    with pytest.raises(DownloadError) as info:
        download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert (tmp_path / "enc.onnx").read_bytes() == b"weights"
    assert "memory_encoder.onnx" in str(info.value) and str(tmp_path) in str(info.value)
    (tmp_path / "memory_encoder.onnx").write_bytes(b"exported by hand")
    assert download_bundle(spec, dest=tmp_path, retry_wait=0) == tmp_path


def test_bundle_without_file_list_explains_manual_download(tmp_path):
    with pytest.raises(DownloadError) as info:
        download_bundle(make_spec([]), dest=tmp_path)
    assert "by hand" in str(info.value) and str(tmp_path) in str(info.value)


def test_cancel_from_progress_keeps_the_part_for_resume(hub, tmp_path):
    data = payload(3 * MIB, 10)
    spec = make_spec([serve(hub, "enc.onnx", data)])

    def cancel(name, done, total):
        if done >= MIB:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        download_bundle(spec, dest=tmp_path, progress=cancel, retry_wait=0)
    assert (tmp_path / "enc.onnx.part").stat().st_size == MIB
    download_bundle(spec, dest=tmp_path, retry_wait=0)
    assert range_headers(hub)[-1] == f"bytes={MIB}-"
    assert (tmp_path / "enc.onnx").read_bytes() == data


def test_default_destination_follows_the_home_variable(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path))
    spec = make_spec([serve(hub, "enc.onnx", b"w")], bundle_id="my-bundle")
    assert download_bundle(spec, retry_wait=0) == tmp_path / "models" / "my-bundle"
    assert (tmp_path / "models" / "my-bundle" / "enc.onnx").read_bytes() == b"w"


def test_verify_folder_reports_missing_and_size(tmp_path):
    spec = make_spec(
        [FileSpec("a.onnx", "https://h/a.onnx", None, 10), FileSpec("b.onnx", "", None, None)]
    )
    (tmp_path / "a.onnx").write_bytes(b"123")
    problems = verify_folder(spec, tmp_path)
    assert [(p.file, p.kind) for p in problems] == [("a.onnx", "size"), ("b.onnx", "missing")]
    assert "expected 10" in str(problems[0])


def test_sha256_file_matches_hashlib(tmp_path):
    data = payload(10_001, 11)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f", chunk=97) == sha(data)
