"""Downloads through huggingface_hub against a fake Hub on 127.0.0.1, and their certification."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
from pathlib import Path

import onnx
import pytest
from huggingface_hub import constants, file_download
from onnx import TensorProto, helper, numpy_helper

from fake_hub import FakeHub
from napari_sam3_onnx.models.download import (
    RECORD_NAME,
    STAGING,
    download_bundle,
    sha256_file,
    verify_folder,
)
from napari_sam3_onnx.models.errors import (
    ChecksumMismatchError,
    ContentMismatchError,
    DownloadError,
    GatedModelError,
    RecordedChecksumMismatchError,
    SizeMismatchError,
    TokenAccessError,
)
from napari_sam3_onnx.models.registry import BundleSpec, FileSpec, hf_url

KIB = 1 << 10
REPO = "test/repo"
REV = "abc1230000000000000000000000000000000000"
LOGIN_PAGE = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>log in</body></html>"


def payload(n: int, seed: int = 0) -> bytes:
    """Deterministic, non-repeating bytes (so an offset error changes the hash)."""
    out = bytearray()
    for counter in itertools.count():
        if len(out) >= n:
            break
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
    return bytes(out[:n])


def tiny_onnx(n_weights: int = 16, seed: int = 0) -> bytes:
    """A valid ONNX graph (y = x + w) whose bytes differ with ``seed``; about 4 * n bytes."""
    import numpy as np

    w = numpy_helper.from_array(
        np.random.default_rng(seed).standard_normal(n_weights).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n_weights])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n_weights])], [w])
    return helper.make_model(graph).SerializeToString()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hub(monkeypatch):
    server = FakeHub()
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 * KIB)  # progress and resume steps
    yield server
    server.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "models" / "test-bundle"


def make_spec(files, gated=False, bundle_id="test-bundle") -> BundleSpec:
    return BundleSpec(
        id=bundle_id, title="Test bundle", layout="hf-tracker", files=tuple(files),
        source_repo=REPO, revision=REV, licence_name="SAM License",
        licence_url="https://example.invalid/LICENSE", capabilities=frozenset({"encode"}),
        precision="fp32", notes="Test notes.", gated=gated)


def serve(hub: FakeHub, name: str, data: bytes, published_hash=True, size=None,
          prefix: str = "") -> FileSpec:
    """Serve ``data`` as ``prefix + name`` of the test repo; the FileSpec a registry would hold."""
    hub.files[f"/{REPO}/resolve/{REV}/{prefix}{name}"] = data
    return FileSpec(name, hf_url(REPO, REV, prefix + name), sha(data) if published_hash else None,
                    size)


def path_of(name: str, prefix: str = "") -> str:
    return f"/{REPO}/resolve/{REV}/{prefix}{name}"


def cache_repo() -> Path:
    return Path(constants.HF_HUB_CACHE) / "models--test--repo"


def fetch(spec, hub, **kwargs):
    kwargs.setdefault("retry_wait", 0)
    return download_bundle(spec, endpoint=hub.endpoint, **kwargs)


def test_files_land_in_the_hugging_face_cache_and_the_bundle_folder_links_them(hub, home):
    enc, data = tiny_onnx(4000, 1), payload(300 * KIB + 17, 2)
    spec = make_spec([serve(hub, "enc.onnx", enc, prefix="onnx/"),
                      serve(hub, "enc.onnx_data", data, published_hash=False, prefix="onnx/")])
    folder = fetch(spec, hub)
    assert folder == home
    assert (folder / "enc.onnx").read_bytes() == enc
    assert (folder / "enc.onnx_data").read_bytes() == data
    cached = cache_repo() / "snapshots" / REV / "onnx" / "enc.onnx"
    assert cached.read_bytes() == enc  # one copy, in the cache every HF tool shares
    assert (folder / "enc.onnx").resolve() == cached.resolve()
    records = json.loads((folder / RECORD_NAME).read_text())
    assert records["enc.onnx_data"]["sha256"] == sha(data)
    assert records["enc.onnx_data"]["size"] == len(data)
    assert "enc.onnx" not in records  # its hash is published, nothing to record
    assert verify_folder(spec, folder) == []
    n = len(hub.gets())
    assert fetch(spec, hub) == folder and len(hub.gets()) == n  # nothing fetched twice


def test_dest_gets_the_files_themselves_and_leaves_the_cache_alone(hub, tmp_path):
    enc = tiny_onnx(64, 3)
    spec = make_spec([serve(hub, "enc.onnx", enc, prefix="onnx/")])
    folder = fetch(spec, hub, dest=tmp_path / "mine")
    target = folder / "enc.onnx"
    assert target.read_bytes() == enc and not target.is_symlink()
    assert not (folder / STAGING).exists() and not (folder / "onnx").exists()
    assert not cache_repo().exists()


def test_progress_counts_increase_and_end_at_the_total(hub, home):
    data = payload(600 * KIB + 123)
    spec = make_spec([serve(hub, "big.bin", data)])
    calls = []
    fetch(spec, hub, progress=lambda *c: calls.append(c))
    done = [d for name, d, _ in calls if name == "big.bin"]
    assert len(done) >= 5
    assert all(later > earlier for earlier, later in itertools.pairwise(done))
    assert done[0] == 0 and done[-1] == len(data)
    assert {total for _, _, total in calls} == {len(data)}


def test_a_dropped_connection_resumes_with_a_range_request(hub, home, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda s: None)
    data = tiny_onnx(200_000, 4)  # about 800 KB
    spec = make_spec([serve(hub, "enc.onnx", data, published_hash=False)])
    hub.cut_after[path_of("enc.onnx")] = [256 * KIB, 100 * KIB]
    fetch(spec, hub)
    assert (home / "enc.onnx").read_bytes() == data
    ranges = [h.get("range") for _, h in hub.gets()]
    assert ranges[:2] == [None, f"bytes={256 * KIB}-"] and len(ranges) == 3
    assert int(ranges[2].removeprefix("bytes=").rstrip("-")) > 256 * KIB
    assert json.loads((home / RECORD_NAME).read_text())["enc.onnx"]["sha256"] == sha(data)


def test_a_connection_that_keeps_dropping_certifies_and_keeps_nothing(hub, home, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda s: None)
    data = tiny_onnx(200_000, 5)
    spec = make_spec([serve(hub, "enc.onnx", data, published_hash=False)])
    hub.cut_after[path_of("enc.onnx")] = [256 * KIB] + [0] * 10
    with pytest.raises(DownloadError) as info:
        fetch(spec, hub, retries=0)
    message = str(info.value)
    assert hf_url(REPO, REV, "enc.onnx") in message and str(home) in message
    assert "nothing of it was kept" in message and "\n" not in message
    assert not (home / "enc.onnx").exists() and not (home / RECORD_NAME).exists()
    assert not [p for p in cache_repo().rglob("*") if p.is_file()]  # no partial blob either

    hub.cut_after.clear()
    fetch(spec, hub)
    assert (home / "enc.onnx").read_bytes() == data


def test_401_is_a_gated_repository_and_nothing_is_downloaded(hub, home):
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx())])
    hub.status["*"] = 401
    with pytest.raises(GatedModelError) as info:
        fetch(spec, hub)
    assert not isinstance(info.value, TokenAccessError)
    assert "accept" in str(info.value) and "token" in str(info.value)
    assert not any(home.iterdir())


def test_403_with_a_token_says_the_token_lacks_access_to_the_repository(hub, home):
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx())], gated=True)
    hub.status["*"] = 403
    with pytest.raises(TokenAccessError) as info:
        fetch(spec, hub, token="hf_test")
    message = str(info.value)
    assert REPO in message and "no access" in message and "token" in message
    assert "\n" not in message
    assert hub.requests[0][2].get("authorization") == "Bearer hf_test"
    assert not any(home.iterdir())


def test_401_with_a_token_says_the_token_is_not_valid(hub, home):
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx())])
    hub.status["*"] = 401
    with pytest.raises(TokenAccessError) as info:
        fetch(spec, hub, token="hf_revoked")
    assert "HTTP 401" in str(info.value) and "not valid" in str(info.value)


def test_gated_without_any_token_asks_for_one_before_any_request(hub, home):
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx())], gated=True)
    with pytest.raises(GatedModelError) as info:
        fetch(spec, hub)
    assert "accept" in str(info.value) and str(home) in str(info.value)
    assert hub.requests == [] and not home.exists()


def test_gated_uses_the_token_from_the_environment(hub, home, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    enc = tiny_onnx(8, 5)
    spec = make_spec([serve(hub, "enc.onnx", enc)], gated=True)
    fetch(spec, hub)
    assert all(h.get("authorization") == "Bearer hf_from_env" for _, _, h in hub.requests)
    assert (home / "enc.onnx").read_bytes() == enc


def test_a_wrong_hash_records_nothing_and_removes_the_cached_copy(hub, home):
    data = tiny_onnx(32, 6)
    good = serve(hub, "enc.onnx", data)
    spec = make_spec([FileSpec(good.name, good.url, sha(b"something else"))])
    with pytest.raises(ChecksumMismatchError) as info:
        fetch(spec, hub)
    assert info.value.actual == sha(data) and info.value.expected == sha(b"something else")
    assert "expected SHA-256" in str(info.value)
    assert "was deleted and nothing was recorded" in str(info.value)  # says what was done
    assert not (home / "enc.onnx").exists() and not (home / RECORD_NAME).exists()
    assert not list((cache_repo() / "blobs").iterdir())
    assert fetch(make_spec([good]), hub) == home  # the right pin fetches it afresh
    assert (home / "enc.onnx").read_bytes() == data


def test_a_size_the_registry_knows_must_match(hub, home):
    data = payload(5000, 7)
    good = serve(hub, "enc.bin", data)
    with pytest.raises(SizeMismatchError):
        fetch(make_spec([FileSpec(good.name, good.url, None, 4000)]), hub)
    assert not (home / "enc.bin").exists() and not (home / RECORD_NAME).exists()


def test_a_404_names_the_url(hub, home):
    gone = FileSpec("gone.onnx", hf_url(REPO, REV, "gone.onnx"))
    with pytest.raises(DownloadError) as info:
        fetch(make_spec([gone]), hub)
    assert gone.url in str(info.value) and "404" in str(info.value)


def test_server_errors_are_retried_then_named(hub, home, monkeypatch):
    monkeypatch.setattr(file_download.time, "sleep", lambda s: None)
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx())])
    hub.status["*"] = 503
    with pytest.raises(DownloadError) as info:
        fetch(spec, hub, retries=1)
    assert hf_url(REPO, REV, "enc.onnx") in str(info.value)
    assert not (home / "enc.onnx").exists()


def test_offline_mode_names_the_folder_and_serves_what_is_cached(hub, home, monkeypatch):
    enc = tiny_onnx(8, 8)
    spec = make_spec([serve(hub, "enc.onnx", enc), serve(hub, "dec.onnx", tiny_onnx(8, 9))])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DownloadError) as info:
        fetch(spec, hub)
    message = str(info.value)
    assert "Offline" in message and str(home) in message and "enc.onnx, dec.onnx" in message
    assert hub.requests == []

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    fetch(spec, hub)
    for name in ("enc.onnx", "dec.onnx"):
        (home / name).unlink()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    n = len(hub.requests)
    assert fetch(spec, hub) == home and len(hub.requests) == n  # from the cache, no network
    assert (home / "enc.onnx").read_bytes() == enc


def test_an_endpoint_that_is_not_a_url_is_one_clear_line(hub, home):
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx())])
    with pytest.raises(DownloadError) as info:
        download_bundle(spec, endpoint="notaurl")
    assert "'notaurl' is not a URL" in str(info.value) and "\n" not in str(info.value)


def test_verified_files_are_skipped_and_damaged_ones_fetched_again(hub, home):
    a, b = tiny_onnx(100, 10), payload(3000, 11)
    spec = make_spec([serve(hub, "a.onnx", a), serve(hub, "b.bin", b, published_hash=False)])
    fetch(spec, hub)
    n = len(hub.gets())
    calls = []
    fetch(spec, hub, progress=lambda *c: calls.append(c))
    assert len(hub.gets()) == n
    assert calls == [("a.onnx", len(a), len(a)), ("b.bin", 3000, 3000)]

    for name in ("a.onnx", "b.bin"):  # replace the links by damaged copies
        (home / name).unlink()
    (home / "a.onnx").write_bytes(tiny_onnx(100, 12))
    (home / "b.bin").write_bytes(payload(3000, 99))  # damaged too: other bytes, same size
    problems = verify_folder(spec, home)
    assert [(p.file, p.kind) for p in problems] == [("a.onnx", "sha256"), ("b.bin", "sha256")]
    fetch(spec, hub)
    assert (home / "a.onnx").read_bytes() == a and (home / "b.bin").read_bytes() == b


def test_a_changed_upstream_file_fails_its_first_download_record(hub, home):
    spec = make_spec([serve(hub, "b.onnx", tiny_onnx(8, 13), published_hash=False)])
    fetch(spec, hub, dest=home)
    (home / "b.onnx").unlink()
    hub.files[path_of("b.onnx")] = tiny_onnx(8, 14)
    with pytest.raises(RecordedChecksumMismatchError) as info:
        fetch(spec, hub, dest=home)
    assert RECORD_NAME in str(info.value)
    assert not (home / "b.onnx").exists()


def test_unpublished_files_are_named_after_the_rest_is_fetched(hub, home):
    enc = tiny_onnx(8, 15)
    spec = make_spec([serve(hub, "enc.onnx", enc), FileSpec("memory_encoder.onnx", "")])
    with pytest.raises(DownloadError) as info:
        fetch(spec, hub)
    assert (home / "enc.onnx").read_bytes() == enc
    assert "memory_encoder.onnx" in str(info.value) and str(home) in str(info.value)
    (home / "memory_encoder.onnx").write_bytes(tiny_onnx(8, 16))
    assert fetch(spec, hub) == home


def test_bundle_without_file_list_explains_manual_download(tmp_path):
    with pytest.raises(DownloadError) as info:
        download_bundle(make_spec([]), dest=tmp_path)
    assert "by hand" in str(info.value) and str(tmp_path) in str(info.value)


def test_cancel_from_progress_stops_and_keeps_nothing(hub, home):
    data = payload(640 * KIB, 17)
    spec = make_spec([serve(hub, "enc.bin", data)])

    def cancel(name, done, total):
        if done >= 128 * KIB:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fetch(spec, hub, progress=cancel)
    assert not (home / "enc.bin").exists()
    assert not [p for p in cache_repo().rglob("*") if p.is_file()]
    fetch(spec, hub)
    assert (home / "enc.bin").read_bytes() == data


def test_a_file_from_a_plain_url_is_fetched_and_checked(hub, home):
    vocab = gzip.compress(b"merges\n" * 500)
    hub.files["/raw/vocab.txt.gz"] = vocab
    spec = make_spec([FileSpec("vocab.txt.gz", hub.url("/raw/vocab.txt.gz"), sha(vocab),
                               len(vocab))])
    fetch(spec, hub)
    assert (home / "vocab.txt.gz").read_bytes() == vocab and not list(home.glob("*.part"))
    hub.files["/raw/login.txt.gz"] = LOGIN_PAGE
    bad = make_spec([FileSpec("other.txt.gz", hub.url("/raw/login.txt.gz"))])
    with pytest.raises(ContentMismatchError):
        fetch(bad, hub)
    assert not (home / "other.txt.gz").exists() and not list(home.glob("*.part"))


def test_default_destination_follows_the_home_variable(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path))
    spec = make_spec([serve(hub, "enc.onnx", tiny_onnx(8, 18))], bundle_id="my-bundle")
    assert fetch(spec, hub) == tmp_path / "models" / "my-bundle"
    assert (tmp_path / "models" / "my-bundle" / "enc.onnx").is_file()


def test_verify_folder_reports_missing_content_and_size(tmp_path):
    spec = make_spec([FileSpec("a.bin", "https://h/a.bin", None, 10),
                      FileSpec("b.onnx", "", None, None),
                      FileSpec("c.onnx", "https://h/c.onnx")])
    (tmp_path / "a.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "c.onnx").write_bytes(LOGIN_PAGE)
    problems = verify_folder(spec, tmp_path)
    assert [(p.file, p.kind) for p in problems] == [
        ("a.bin", "size"), ("b.onnx", "missing"), ("c.onnx", "content")]
    assert "expected 10" in str(problems[0]) and "HTML" in str(problems[2])


def test_sha256_file_matches_hashlib(tmp_path):
    data = payload(10_001, 19)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f", chunk=97) == sha(data)


def test_tiny_onnx_is_an_onnx_model(tmp_path):
    # The helper's graphs must pass both onnx's checker and our own content check, or the
    # refusal tests below would pass for the wrong reason.
    from napari_sam3_onnx.models.content_check import content_problem

    data = tiny_onnx(8, 20)
    onnx.checker.check_model(onnx.load_from_string(data))
    path = tmp_path / "tiny.onnx"
    path.write_bytes(data)
    assert content_problem(path) is None
    path.write_bytes(LOGIN_PAGE)
    assert content_problem(path) is not None


def test_an_html_login_page_served_as_onnx_is_refused_before_anything_is_recorded(hub, home):
    hub.lfs = False  # a login page comes from the web server, not from LFS storage
    spec = make_spec([serve(hub, "enc.onnx", LOGIN_PAGE, published_hash=False),
                      serve(hub, "enc.onnx.data", payload(999, 21), published_hash=False)])
    with pytest.raises(ContentMismatchError) as info:
        fetch(spec, hub)
    message = str(info.value)
    assert "enc.onnx" in message and "HTML" in message and str(home) in message
    assert "nothing was recorded" in message and "\n" not in message
    assert not (home / "enc.onnx").exists() and not (home / RECORD_NAME).exists()
    assert not [p for p in (cache_repo() / "blobs").iterdir()]  # not left in the shared cache

    hub.files[path_of("enc.onnx")] = good = tiny_onnx(8, 22)  # the server is fixed
    fetch(spec, hub)
    assert (home / "enc.onnx").read_bytes() == good
    assert json.loads((home / RECORD_NAME).read_text())["enc.onnx"]["sha256"] == sha(good)


@pytest.mark.parametrize("name, junk", [("enc.onnx", b"\x00\x01garbage that is not protobuf"),
                                        ("constants.json", b"{not json"),
                                        ("video_constants.npz", b"PK but not a zip"),
                                        ("enc.onnx_data", LOGIN_PAGE)])
def test_files_that_are_not_what_their_name_says_are_refused(hub, home, name, junk):
    spec = make_spec([serve(hub, name, junk, published_hash=False)])
    with pytest.raises(ContentMismatchError):
        fetch(spec, hub)
    assert not (home / name).exists() and not (home / RECORD_NAME).exists()


def test_a_refetch_replaces_a_record_that_certified_a_bad_file(hub, home):
    """Records from before content checks (or of a file now refused) certify nothing."""
    home.mkdir(parents=True)
    (home / "enc.onnx").write_bytes(LOGIN_PAGE)
    url = hf_url(REPO, REV, "enc.onnx")
    bad = {"enc.onnx": {"url": url, "sha256": sha(LOGIN_PAGE), "size": len(LOGIN_PAGE)}}
    (home / RECORD_NAME).write_text(json.dumps(bad))
    good = tiny_onnx(8, 23)
    spec = make_spec([serve(hub, "enc.onnx", good, published_hash=False)])
    assert [p.kind for p in verify_folder(spec, home)] == ["content"]
    fetch(spec, hub)
    assert (home / "enc.onnx").read_bytes() == good
    record = json.loads((home / RECORD_NAME).read_text())["enc.onnx"]
    assert record["sha256"] == sha(good) and record["checked"] == 1
    assert verify_folder(spec, home) == []


def test_an_unchecked_record_of_a_deleted_file_does_not_block_a_good_download(hub, home):
    home.mkdir(parents=True)
    url = hf_url(REPO, REV, "enc.onnx")
    (home / RECORD_NAME).write_text(json.dumps(
        {"enc.onnx": {"url": url, "sha256": sha(LOGIN_PAGE), "size": len(LOGIN_PAGE)}}))
    good = tiny_onnx(8, 24)
    fetch(make_spec([serve(hub, "enc.onnx", good, published_hash=False)]), hub)
    assert json.loads((home / RECORD_NAME).read_text())["enc.onnx"]["sha256"] == sha(good)


def test_no_network_names_url_folder_and_files(home, monkeypatch):
    import socket
    import time

    monkeypatch.setattr(time, "sleep", lambda s: None)  # the library's back-off between tries

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = make_spec([FileSpec("enc.onnx", hf_url(REPO, REV, "enc.onnx")),
                      FileSpec("enc.onnx.data", hf_url(REPO, REV, "enc.onnx.data"))])
    with pytest.raises(DownloadError) as info:
        download_bundle(spec, endpoint=f"http://127.0.0.1:{port}", retries=0)
    message = str(info.value)
    assert hf_url(REPO, REV, "enc.onnx") in message and str(home) in message
    assert "enc.onnx, enc.onnx.data" in message and "\n" not in message
    assert not isinstance(info.value, GatedModelError)
