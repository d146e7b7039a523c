"""A header cache never serves a changed file: every way a file changes makes it read again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from napari_sam3_onnx.models.header_cache import FileIdentity, HeaderCache

SETTLE = 0.15  # seconds: short, so the tests wait little; the rule is the same as SETTLE_S


def _content(path: Path, f, size: int) -> bytes:
    return f.read()


def _settle() -> None:
    time.sleep(SETTLE + 0.05)


@pytest.fixture
def cache() -> HeaderCache[bytes]:
    return HeaderCache(entries=4, settle_s=SETTLE)


@pytest.fixture
def graph(tmp_path) -> Path:
    path = tmp_path / "g.onnx"
    path.write_bytes(b"A" * 1000)
    _settle()
    return path


def test_an_unchanged_file_is_read_once(cache, graph):
    assert cache.get(graph, _content) == b"A" * 1000
    assert cache.get(graph, _content) == b"A" * 1000
    assert (cache.reads, cache.hits) == (1, 1)


def test_a_file_just_written_is_answered_but_not_kept(cache, tmp_path):
    path = tmp_path / "fresh.onnx"
    path.write_bytes(b"new")
    assert cache.get(path, _content) == b"new"
    assert cache.get(path, _content) == b"new"
    assert (cache.reads, cache.hits) == (2, 0)  # within the settling time: read each time


def test_same_size_rewrite_with_mtime_put_back_is_read_again(cache, graph):
    st = graph.stat()
    cache.get(graph, _content)
    with graph.open("r+b") as f:  # in place: same inode, same size
        f.write(b"B")
    os.utime(graph, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime as it was: ctime moves on
    assert graph.stat().st_mtime_ns == st.st_mtime_ns
    assert cache.get(graph, _content) == b"B" + b"A" * 999


def test_a_file_replaced_by_rename_is_read_again(cache, graph, tmp_path):
    cache.get(graph, _content)
    other = tmp_path / "other"
    other.write_bytes(b"C" * 1000)
    st = graph.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    other.replace(graph)  # what an atomic download does: a new inode under the same name
    assert cache.get(graph, _content) == b"C" * 1000


@pytest.mark.parametrize("change", ["truncate", "append", "touch"])
def test_truncated_grown_or_touched_is_read_again(cache, graph, change):
    cache.get(graph, _content)
    _settle()
    if change == "truncate":
        os.truncate(graph, 10)
    elif change == "append":
        with graph.open("ab") as f:
            f.write(b"D")
    else:
        graph.touch()
    want = {"truncate": b"A" * 10, "append": b"A" * 1000 + b"D", "touch": b"A" * 1000}[change]
    assert cache.get(graph, _content) == want
    assert cache.hits == 0


def test_a_file_changed_while_read_is_not_kept(cache, graph):
    def read_and_change(path, f, size):
        data = f.read()
        with path.open("ab") as g:
            g.write(b"E")
        return data

    assert cache.get(graph, read_and_change) == b"A" * 1000
    assert cache.get(graph, _content) == b"A" * 1000 + b"E"  # not the answer kept before


def test_errors_are_not_kept(cache, graph):
    def broken(path, f, size):
        raise ValueError("bad")

    with pytest.raises(ValueError):
        cache.get(graph, broken)
    assert cache.get(graph, _content) == b"A" * 1000


def test_at_most_entries_files_are_kept(cache, tmp_path):
    paths = []
    for k in range(6):
        paths.append(tmp_path / f"g{k}.onnx")
        paths[-1].write_bytes(bytes([k]) * 10)
    _settle()
    for p in paths:
        cache.get(p, _content)
    assert len(cache._kept) == 4
    cache.get(paths[-1], _content)
    assert cache.hits == 1
    cache.get(paths[0], _content)  # dropped as the oldest: read again
    assert cache.hits == 1


def test_a_clock_behind_the_file_is_not_settled():
    future = time.time_ns() + 10**10
    assert not FileIdentity(0, 0, 0, future, future).settled(0.0)
    assert FileIdentity(0, 0, 0, 0, 0).settled(1.0)


def test_read_signature_reads_a_settled_graph_once_and_a_changed_one_again(tmp_path, monkeypatch):
    onnx = pytest.importorskip("onnx")
    from napari_sam3_onnx.models import graph_info
    from napari_sam3_onnx.testing.builder import GraphBuilder

    monkeypatch.setattr(graph_info, "SIGNATURES", HeaderCache(settle_s=SETTLE))

    def save(out: str) -> Path:
        b = GraphBuilder("g")
        x = b.input("x", "float32", [2, 3])
        b.output(b.Add(x, b.const(np.ones((2, 3), np.float32))), out, "float32", [2, 3])
        path = tmp_path / "g.onnx"
        onnx.save(b.model(), str(path))
        return path

    path = save("y")
    _settle()
    assert graph_info.read_signature(path).output_names == {"y"}
    assert graph_info.read_signature(path).output_names == {"y"}
    assert graph_info.SIGNATURES.hits == 1
    st = path.stat()
    save("z")  # same length of name: very likely the same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert graph_info.read_signature(path).output_names == {"z"}
