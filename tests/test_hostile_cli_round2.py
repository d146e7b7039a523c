"""The command line against a hostile user, second round: hangs, odd inputs, misleading ends.

As in ``test_hostile_cli.py`` every case runs in one child process (``_hostile_driver.py``)
and must give the documented exit code, one line with the expected words, no traceback, and
leave every file that existed before it byte-identical. The child runs without the right to
read files their mode forbids (``setpriv`` drops root's override), so an unreadable file is
unreadable even for root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from fake_hub import FakeHub
from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

HERE = Path(__file__).parent
W = ["--window", "500", "26000"]
TEXT = ["text", "{b}/wk", "{d}/cells.tif", "--concepts", "nucleus", *W]
PRE = ["precompute", "{b}/wk", "{d}/cells.tif"]
LONG = "a" * 240

#: (id, argv, exit code, words in stderr, paths (relative to the data folder) it may change)
CASES = [
    # 29.4 hangs
    ("fifo-input", ["precompute", "{b}/wk", "{d}/fifo.npy", "--store", "{d}/f.zarr"], 2,
     "is not a regular file", ()),
    ("tile-3", [*PRE, "--store", "{d}/t.zarr", "--tile", "3"], 2, "32 pixels or more", ()),
    ("threads-1000", [*PRE, "--store", "{d}/t.zarr", "--threads", "1000"], 2, "give at most",
     ()),
    # 29.5 a corrupt chunk in a zarr input
    ("corrupt-zarr-chunk", ["text", "{b}/wk", "{d}/bad.zarr", "--concepts", "nucleus", *W,
                            "--out", "{d}/bz.tif"], 2, "bad.zarr at slice 1", ()),
    # 29.6 plain messages, not "unexpected error"
    ("link-iou-1", [*TEXT, "--out", "{d}/l.tif", "--link-iou", "1"], 2,
     "up to (not including) 1", ()),
    ("lone-surrogate", [*TEXT[:3], "--concepts", "nuc\udcffleus", *W, "--out", "{d}/s.tif"], 2,
     "not valid text", ()),
    ("redirect-loop", ["fetch", "hf-tracker", "--endpoint", "{hub}"], 2, "redirect", ()),
    # 29.6 outcomes that look right
    ("store-in-input-folder-1", ["precompute", "{b}/wk", "{d}/din", *W, "--store",
                                 "{d}/din/emb.zarr"], 0, "", ()),
    ("store-in-input-folder-2", ["precompute", "{b}/wk", "{d}/din", *W, "--store",
                                 "{d}/din/emb.zarr"], 0, "", ()),
    ("one-plane-stack", ["text", "{b}/wk", "{d}/one.tif", "--concepts", "nucleus", *W, "--out",
                         "{d}/one-labels.tif"], 0, "", ()),
    ("all-true-plane", ["text", "{b}/wk", "{d}/masks.npy", "--concepts", "nucleus", "--out",
                        "{d}/masks-labels.npy"], 0, "", ()),
    # 30.1 multi-series TIFF: the full-resolution series, said; a tie refused
    ("preview-first-series", ["text", "{b}/wk", "{d}/multi.tif", "--concepts", "nucleus", *W,
                              "--out", "{d}/multi-labels.tif"], 0,
     "reading series 1, the full-resolution one", ()),
    ("two-full-size-series", ["text", "{b}/wk", "{d}/two.tif", "--concepts", "nucleus", *W,
                              "--out", "{d}/two-labels.tif"], 2, "name one with --series", ()),
    ("named-series", ["text", "{b}/wk", "{d}/two.tif", "--concepts", "nucleus", *W, "--out",
                      "{d}/two-1.tif", "--series", "1"], 0, "", ()),
    ("series-out-of-range", ["text", "{b}/wk", "{d}/two.tif", "--concepts", "nucleus", *W,
                             "--out", "{d}/two-5.tif", "--series", "5"], 2,
     "--series 5: {d}/two.tif holds 2 image series", ()),
    # 30.3 refused before the work
    ("symlinked-zarr-out", [*TEXT, "--out", "{d}/link.zarr", "--overwrite"], 2,
     "is a symbolic link", ()),
    ("name-too-long", [*TEXT, "--out", "{d}/" + LONG + ".tif"], 2, "give a name of at most",
     ()),
    # 30.4 messages that mislead
    ("tokenizer-unreadable", [*TEXT[:1], "{b}/wk-noread", *TEXT[2:], "--out", "{d}/u.tif"], 1,
     "permission denied", ()),
    ("slices-negative", [*TEXT, "--out", "{d}/neg.tif", "--slices", "-2:"], 0, "", ()),
]


def _drop_read_override() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: an unreadable file cannot be made")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile2")
    d, b = root / "data", root / "bundles"
    d.mkdir()
    b.mkdir()
    write_toy_tokenizer(build_wkentaro_v03(b / "wk"))
    shutil.copytree(b / "wk", b / "wk-noread")
    (b / "wk-noread" / "tokenizer.json").chmod(0)
    stack = np.stack([planted_image()[..., 0].astype(np.uint16) * 100 + 500] * 3)
    stack[1, :20] += 700
    tifffile.imwrite(d / "cells.tif", stack, photometric="minisblack")
    tifffile.imwrite(d / "one.tif", stack[:1], photometric="minisblack")
    os.mkfifo(d / "fifo.npy")
    zarr.create_array(str(d / "bad.zarr"), data=stack, chunks=(1, 60, 90))
    chunk = next(p for p in (d / "bad.zarr").rglob("*") if p.is_file() and
                 p.relative_to(d / "bad.zarr").parts[:2] == ("c", "1"))
    chunk.write_bytes(b"not a compressed chunk")
    with tifffile.TiffWriter(d / "multi.tif") as tw:  # a 32 x 32 preview, then the stack
        tw.write(np.zeros((32, 32), np.uint16), photometric="minisblack")
        tw.write(stack, photometric="minisblack")
    with tifffile.TiffWriter(d / "two.tif") as tw:  # two positions of the same size
        tw.write(stack, photometric="minisblack")
        tw.write(stack[::-1], photometric="minisblack")
    masks = np.zeros((4, 60, 90), bool)
    masks[2] = True  # an all-True plane among blank ones
    np.save(d / "masks.npy", masks)
    (d / "din").mkdir()
    shutil.copy(d / "cells.tif", d / "din" / "cells.tif")
    zarr.create_array(str(d / "real.zarr"), data=np.zeros((3, 60, 90), np.int32))
    os.symlink(d / "real.zarr", d / "link.zarr")
    return root


@pytest.fixture(scope="module")
def results(tree):
    hub = FakeHub()
    hub.redirect["*"] = "/loop"
    hub.redirect["/loop"] = "/loop"
    try:
        fmt = {"d": tree / "data", "b": tree / "bundles", "hub": hub.endpoint}
        cases = [{"id": cid, "argv": [a.format(**fmt) for a in argv]}
                 for cid, argv, *_ in CASES]
        spec = tree / "cases.json"
        spec.write_text(json.dumps({"root": str(tree / "data"), "cases": cases}))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"),
                                                            os.environ.get("PYTHONPATH", "")]),
               "NAPARI_SAM3_ONNX_HOME": str(tree / "home"), "HF_HOME": str(tree / "hf")}
        env.pop("NAPARI_SAM3_ONNX_DEBUG", None)
        env.pop("HF_TOKEN", None)
        done = subprocess.run([*_drop_read_override(), sys.executable,
                               str(HERE / "_hostile_driver.py"), str(spec)],
                              capture_output=True, text=True, timeout=300, env=env, cwd=tree)
    finally:
        hub.close()
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(("cid", "argv", "code", "words", "may_change"), CASES,
                         ids=[c[0] for c in CASES])
def test_hostile_command_line(results, tree, cid, argv, code, words, may_change):
    got = results[cid]
    err = got["stderr"]
    assert "Traceback" not in err and "unexpected" not in err, err
    assert got["code"] == code, err
    assert words.format(d=tree / "data") in err, err
    if code != 0:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        usage = lines and lines[0].startswith("usage:")  # argparse's usage, then its one line
        assert len([ln for ln in lines if "error:" in ln]) == 1, err
        assert usage or len(lines) == 1, err
    allowed = {str(tree / "data" / p) for p in may_change}
    assert set(got["changed"]) <= allowed, got["changed"]


def test_what_the_successful_cases_wrote(results, tree):
    d = tree / "data"
    assert "skipped 3" in results["store-in-input-folder-2"]["stdout"]
    assert tifffile.imread(d / "one-labels.tif").shape == (1, 60, 90)  # the axis is kept
    with tifffile.TiffFile(d / "one-labels.tif") as tf:
        assert tf.series[0].axes == "ZYX"
    multi = tifffile.imread(d / "multi-labels.tif")
    assert multi.shape == (3, 60, 90) and multi.any()  # the stack's labels, not the preview's
    assert tifffile.imread(d / "two-1.tif").shape == (3, 60, 90)
    labels = np.load(d / "masks-labels.npy")
    assert labels.shape == (4, 60, 90) and not labels.any()
    assert "on 2 slice(s)" in results["slices-negative"]["stdout"]
    assert not tifffile.imread(d / "neg.tif")[0].any()  # only slices 1 and 2 were searched
    assert not (tree / "home" / "models" / "hf-tracker").exists() or not any(
        p.suffix == ".onnx" for p in (tree / "home" / "models" / "hf-tracker").iterdir())
    assert (d / "real.zarr").is_dir() and (d / "link.zarr").is_symlink()
    assert not list(d.glob(".*partial"))
