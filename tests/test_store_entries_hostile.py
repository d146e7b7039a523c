"""Broken store entries are never "ok" and never served (issue 29, item 2).

Entries are damaged as a hostile user (or a bad copy) would: an array replaced by one of
another shape with its record and checksum made to match, metadata without the model input
size, no features at all, an entry copied onto another slice's place; and two files of one
name in other folders must not share (and replace) each other's entries. ``store verify`` must
report each as broken (exit 1), a command using the store must take it for a miss and encode
the slice again (exit 0, no "unexpected error"), and ``--repair`` must remove it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from conftest import blob_image
from napari_sam3_onnx.engine.store import files as sf
from napari_sam3_onnx.engine.store.embedding_store import ENTRY_KEY

SRC = Path(__file__).parent.parent / "src"
W = ["--window", "0", "3000"]


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("NAPARI_SAM3_ONNX_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "napari_sam3_onnx.cli", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)


def _misshape(entry: Path) -> None:
    """Replace feature f0 by an array with half its columns, record and checksum to match."""
    group = zarr.open_group(str(entry), mode="a", zarr_format=3)
    meta = dict(group.attrs[ENTRY_KEY])
    old = np.asarray(group["f0"][...])
    new = np.ascontiguousarray(old[..., : old.shape[-1] // 2])
    del group["f0"]
    group.create_array("f0", shape=new.shape, dtype=new.dtype)[...] = new
    records = [dict(r) for r in meta["arrays"]]
    records[0] = {"shape": list(new.shape), "dtype": new.dtype.str,
                  sf.CHECKSUM: sf.checksum(new)}
    group.attrs[ENTRY_KEY] = {**meta, "arrays": records}


def _edit_meta(entry: Path, **changes) -> None:
    group = zarr.open_group(str(entry), mode="a", zarr_format=3)
    meta = {k: v for k, v in dict(group.attrs[ENTRY_KEY]).items() if k not in changes}
    group.attrs[ENTRY_KEY] = {**meta, **{k: v for k, v in changes.items() if v is not None}}


@pytest.fixture
def damaged(hf_bundle, tmp_path):
    """A store of 4 slices of st.tif with 00000 misshapen, 00001 without sizes, 00002 empty,
    and 00003 a copy of 00000's original entry."""
    stack = np.stack([blob_image((60, 90), ((20 + z, 15 + 14 * z, 6),), value=1000 + 500 * z,
                                 dtype=np.uint16) for z in range(4)])
    tifffile.imwrite(tmp_path / "st.tif", stack)
    store = tmp_path / "e.zarr"
    done = cli("precompute", str(hf_bundle), "st.tif", "--store", "e.zarr", *W, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    group = store / "st"
    shutil.rmtree(group / "00003")
    shutil.copytree(group / "00000", group / "00003")
    _misshape(group / "00000")
    _edit_meta(group / "00001", input_size=None)
    _edit_meta(group / "00002", features=[], arrays=[])
    return tmp_path, store


def test_store_verify_reports_every_broken_entry(damaged):
    cwd, store = damaged
    done = cli("store", "verify", "e.zarr", cwd=cwd)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "st/0000" in ln]
    assert len(lines) == 4 and all(ln.startswith("corrupt") for ln in lines), done.stdout
    assert "not the store's" in lines[0] and "kept as 00003" in lines[3], done.stdout
    assert "0 ok" in done.stdout
    repaired = cli("store", "verify", "e.zarr", "--repair", cwd=cwd)
    assert repaired.returncode == 0 and "removed 4" in repaired.stdout, repaired.stdout
    assert [p.name for p in (store / "st").iterdir() if p.is_dir()] == []


def test_a_misshapen_entry_is_a_miss_that_is_encoded_again(damaged, hf_bundle):
    cwd, _ = damaged
    done = cli("propagate", str(hf_bundle), "st.tif", "--store", "e.zarr", *W, "--click", "1",
               "0", "20", "15", "--out", "l.tif", "--stop-after", "1", cwd=cwd)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "unexpected" not in done.stderr
    again = cli("precompute", str(hf_bundle), "st.tif", "--store", "e.zarr", *W, cwd=cwd)
    assert again.returncode == 0, again.stderr
    check = cli("store", "verify", "e.zarr", cwd=cwd)
    assert check.returncode == 0 and "4 ok" in check.stdout, check.stdout


def test_two_files_of_one_name_in_other_folders_keep_their_own_entries(hf_bundle, tmp_path):
    for k, folder in enumerate(("a", "b")):
        (tmp_path / folder).mkdir()
        stack = np.stack([blob_image((60, 90), ((20 + z, 15 + 10 * k, 6),), value=900 + 700 * k,
                                     dtype=np.uint16) for z in range(3)])
        tifffile.imwrite(tmp_path / folder / "cells.tif", stack)
    base = ["precompute", str(hf_bundle)]
    for folder in ("a", "b"):
        done = cli(*base, f"{folder}/cells.tif", "--store", "e.zarr", *W, cwd=tmp_path)
        assert done.returncode == 0 and "encoded 3" in done.stdout, done.stdout + done.stderr
    for folder in ("a", "b"):  # neither run replaced the other's entries
        done = cli(*base, f"{folder}/cells.tif", "--store", "e.zarr", *W, cwd=tmp_path)
        assert done.returncode == 0 and "encoded 0" in done.stdout, done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "e.zarr").iterdir() if p.is_dir()) == \
        ["cells", "cells.2"]
    done = cli("propagate", str(hf_bundle), "b/cells.tif", "--store",
               "e.zarr", *W, "--click", "1", "1", "20", "25", "--out", "l.tif",
               "--stop-after", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    check = cli("store", "verify", "e.zarr", cwd=tmp_path)
    assert check.returncode == 0 and "6 ok" in check.stdout, check.stdout
