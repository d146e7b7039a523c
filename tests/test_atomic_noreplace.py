"""The no-replace placement of finished outputs, by each of its ways (issue 29, item 1)."""

from __future__ import annotations

import errno
import os

import pytest

from napari_sam3_onnx.models import atomic


@pytest.fixture(params=["renameat2", "link", "placeholder"])
def way(request, monkeypatch):
    """Force one way: the system call, a hard link, or an exclusively created placeholder."""
    if request.param == "renameat2":
        if os.uname().sysname != "Linux":
            pytest.skip("renameat2 is Linux only")
    else:
        monkeypatch.setattr(atomic, "_renameat2", lambda src, dst: None)
    if request.param == "placeholder":
        def no_link(src, dst):
            raise OSError(errno.EPERM, "no hard links here")

        monkeypatch.setattr(atomic.os, "link", no_link)
    return request.param


def test_a_free_name_is_taken(tmp_path, way):
    tmp = tmp_path / ".out.tif.partial"
    tmp.write_bytes(b"result")
    assert atomic.place_new(tmp, tmp_path / "out.tif")
    assert (tmp_path / "out.tif").read_bytes() == b"result" and not tmp.exists()


def test_a_taken_file_name_is_left_alone(tmp_path, way):
    tmp, theirs = tmp_path / ".out.tif.partial", tmp_path / "out.tif"
    tmp.write_bytes(b"result")
    theirs.write_bytes(b"theirs")
    assert not atomic.place_new(tmp, theirs)
    assert theirs.read_bytes() == b"theirs" and tmp.read_bytes() == b"result"


def test_a_taken_folder_name_is_left_alone_even_when_empty(tmp_path, way):
    tmp, theirs = tmp_path / ".out.zarr.partial", tmp_path / "out.zarr"
    tmp.mkdir()
    (tmp / "zarr.json").write_text("{}")
    theirs.mkdir()  # os.rename would replace an empty folder
    assert not atomic.place_new(tmp, theirs)
    assert theirs.is_dir() and not any(theirs.iterdir()) and (tmp / "zarr.json").is_file()
    assert atomic.keep_new(tmp, theirs) == tmp_path / "out-1.zarr"
    assert (tmp_path / "out-1.zarr" / "zarr.json").is_file()


def test_atomic_output_keeps_the_result_under_a_new_name_and_says_so(tmp_path):
    path = tmp_path / "labels.ome.zarr"
    with pytest.raises(atomic.OutputTakenError) as info:
        with atomic.atomic_output(path, directory=True, replace=False) as tmp:
            (tmp / "zarr.json").write_text("{}")
            path.mkdir()  # another program, meanwhile
    assert info.value.kept == tmp_path / "labels-1.ome.zarr"
    assert str(info.value.kept) in str(info.value)
    assert not any(path.iterdir()) and (info.value.kept / "zarr.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels-1.ome.zarr", "labels.ome.zarr"]


def test_with_consent_the_old_output_is_replaced(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("old")
    with atomic.atomic_output(path, replace=True) as tmp:
        tmp.write_text("new")
    assert path.read_text() == "new"
