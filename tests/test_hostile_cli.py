"""The command line against a hostile user: bad inputs, outputs over data, damaged bundles.

Every case runs through a child process (all of them in one, see ``_hostile_driver.py``, so
the module stays fast) and must give the documented exit code, a one-line message containing
the expected words, no traceback, and leave every file that existed before it byte-identical
(except the output it was allowed to replace).
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

from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.nso import build_nso
from napari_sam3_onnx.testing.pagarcia import build_pagarcia
from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

HERE = Path(__file__).parent
W = ["--window", "500", "26000"]
TEXT = ["text", "{b}/wk", "{d}/cells.tif", "--concepts", "nucleus", *W]
PROP = ["propagate", "{b}/pag", "{d}/p.tif"]
PRE = ["precompute", "{b}/wk", "{d}/cells.tif"]

#: (id, argv, exit code, words in stderr, paths (relative) the case may change)
CASES = [
    # 2. nothing overwritten without consent; inputs never outputs
    ("out-is-input", [*TEXT, "--out", "{d}/cells.tif", "--overwrite"], 2,
     "is the input image {d}/cells.tif", ()),
    ("out-links-to-input", [*TEXT, "--out", "{d}/link.tif", "--overwrite"], 2,
     "is the input image", ()),
    ("out-relative-input", [*TEXT, "--out", "{d}/sub/../cells.tif", "--overwrite"], 2,
     "is the input image", ()),
    ("out-exists", [*TEXT, "--out", "{d}/old.tif"], 2, "already exists; pass --overwrite", ()),
    ("out-is-seed", [*PROP, "--seed-labels", "{d}/seeds.tif", "--out", "{d}/seeds.tif",
                     "--overwrite"], 2, "is the seed labels {d}/seeds.tif", ()),
    ("table-is-store", [*TEXT, "--out", "{d}/n1.tif", "--store", "{d}/emb.zarr", "--table",
                        "{d}/emb.zarr", "--overwrite"], 2, "is the embedding store", ()),
    ("out-in-store", [*TEXT, "--out", "{d}/emb.zarr/x.zarr", "--store", "{d}/emb.zarr"], 2,
     "is inside the embedding store", ()),
    ("out-missing-folder", [*TEXT, "--out", "{d}/nowhere/o.tif", "--store", "{d}/never.zarr"],
     2, "does not exist", ()),
    ("out-equals-table", [*TEXT, "--out", "{d}/same.tif", "--table", "{d}/same.tif"], 2,
     "name the same file", ()),
    ("out-is-folder", [*TEXT, "--out", "{d}/dir.tif", "--overwrite"], 2, "is a folder", ()),
    ("out-not-zarr", [*TEXT, "--out", "{d}/notes.zarr", "--overwrite"], 2,
     "not a zarr array folder", ()),
    ("store-is-input", ["precompute", "{b}/wk", "{d}/arr.npy", "--store", "{d}/arr.npy"], 2,
     "is the input image", ()),
    ("store-is-file", [*PRE, "--store", "{d}/old.tif"], 2, "is a file", ()),
    ("store-holds-input", [*PRE, "--store", "{d}"], 2, "contains the input image", ()),
    ("store-is-user-folder", [*PRE, "--store", "{d}/sub"], 2, "folder of other files", ()),
    ("foreign-partial-kept", [*TEXT, "--out", "{d}/o.tif"], 0, "", ()),
    ("overwrite-replaces", [*TEXT, "--out", "{d}/old.tif", "--overwrite"], 0, "",
     ("old.tif",)),
    # 9. one line, never a traceback
    ("bad-manifest", ["inspect", "{b}/nso-badmanifest"], 1, "manifest.json cannot be read", ()),
    ("bad-npz", ["inspect", "{b}/nso-badnpz"], 1, "constants.npz cannot be read", ()),
    ("bad-constants-json", ["inspect", "{b}/jax-badjson"], 1, "constants.json cannot be read",
     ()),
    ("bad-video-npz", ["inspect", "{b}/pag-badnpz"], 1, "video_constants_single.npz cannot",
     ()),
    ("bad-tokenizer", [*TEXT[:1], "{b}/wk-badtok", *TEXT[2:], "--out", "{d}/t1.tif"], 1,
     "tokenizer.json cannot be read", ()),
    ("zero-size", ["text", "{b}/wk", "{d}/zero.npy", "--concepts", "a", "--out", "{d}/z.tif"], 2,
     "holds no pixels", ()),
    ("string-dtype", [*PRE[:2], "{d}/str.npy", "--store", "{d}/s1.zarr"], 2, "not numbers", ()),
    ("step-zero", [*TEXT, "--out", "{d}/s0.tif", "--slices", "0:5:0"], 2, "step must be", ()),
    ("no-distributed", [*PRE, "--store", "{d}/s2.zarr", "--workers", "2"], 2,
     "napari-sam3-onnx[cluster]", ()),
    ("no-distributed-scheduler", [*PRE, "--store", "{d}/s2.zarr", "--scheduler", "tcp://x:1"],
     2, "napari-sam3-onnx[cluster]", ()),
    ("huge-object-id", [*PROP, "--click", "3000000000", "3", "13", "24", "--out", "{d}/h.tif"],
     2, "up to 2147483647", ()),
    ("click-outside", [*PROP, "--click", "1", "3", "13", "900", "--out", "{d}/h.tif"], 2,
     "outside the 60 x 90 slice", ()),
    ("truncated-tiff", [*TEXT[:2], "{d}/trunc.tif", *TEXT[3:], "--out", "{d}/tr.tif"], 2,
     "{d}/trunc.tif at slice 1", ()),
    ("symlink-loop", [*PRE[:2], "{d}/loop", "--store", "{d}/s3.zarr"], 2, "loops", ()),
    ("bundle-dir-named-onnx", ["inspect", "{b}/onnxdir"], 1, "is a folder, not an .onnx file",
     ()),
    ("two-bundles", ["inspect", "{b}/two"], 1, "second hf-tracker bundle", ()),
    # 10. messages that tell the truth
    ("range-in-user-terms", [*TEXT, "--out", "{d}/r.tif", "--slices", "7:9"], 2,
     "range 7:9 selects no plane: the slice axis has 3 positions", ()),
    ("tiles-not-slices", [*PRE, "--store", "{d}/tiles.zarr", "--tile", "40"], 0, "", ()),
    # 11. validation before work
    ("nan-window", [*TEXT[:5], "--window", "nan", "5", "--out", "{d}/w.tif"], 2,
     "give a finite number", ()),
    ("inverted-window", [*TEXT[:5], "--window", "9", "5", "--out", "{d}/w.tif"], 2,
     "upper limit must be above", ()),
    ("nan-click", [*PROP, "--click", "1", "3", "nan", "24", "--out", "{d}/c.tif"], 2,
     "finite number", ()),
    ("inf-box", [*PROP, "--box", "1", "3", "0", "0", "inf", "30", "--out", "{d}/c.tif"], 2,
     "finite number", ()),
    ("threads-zero", [*PRE, "--store", "{d}/s4.zarr", "--threads", "0"], 2, "1 or more", ()),
    ("workers-zero", [*PRE, "--store", "{d}/s4.zarr", "--workers", "0"], 2, "1 or more", ()),
    ("min-area-negative", [*TEXT, "--out", "{d}/m.tif", "--min-area", "-1"], 2, "0 or more",
     ()),
    ("tile-zero", [*PRE, "--store", "{d}/s4.zarr", "--tile", "0"], 2, "32 pixels or more", ()),
    ("stop-after-zero", [*PROP, "--click", "1", "3", "13", "24", "--out", "{d}/c.tif",
                         "--stop-after", "0"], 2, "1 or more", ()),
    ("empty-seed-labels", [*PROP, "--seed-labels", "{d}/empty.tif", "--seed-slice", "3",
                           "--out", "{d}/c.tif"], 2, "holds no object id", ()),
    ("seed-outside-range", [*PROP, "--click", "1", "6", "13", "24", "--range", "0:4", "--out",
                            "{d}/c.tif"], 2, "outside the range of slices to visit", ()),
    ("same-pixels-warned", [*PROP, "--click", "1", "3", "13", "24", "--click", "2", "3", "13",
                            "24", "--out", "{d}/two.tif", "--stop-after", "1"], 0,
     "warning: Objects 1 and 2 are seeded on the same pixels of slice 3", ()),
]


def _damage(folder: Path, name: str, data: bytes) -> Path:
    (folder / name).write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A data folder and bundle folders, some damaged, as a hostile user would have them."""
    root = tmp_path_factory.mktemp("hostile")
    d, b = root / "data", root / "bundles"
    d.mkdir()
    b.mkdir()
    write_toy_tokenizer(build_wkentaro_v03(b / "wk"))
    shutil.copytree(b / "wk", b / "wk-badtok")
    _damage(b / "wk-badtok", "tokenizer.json", b'{"model": {"type": "BPE", "vocab": ')
    build_pagarcia(b / "pag")
    shutil.copytree(b / "pag", b / "pag-badnpz")
    npz = (b / "pag" / "video_constants_single.npz").read_bytes()
    _damage(b / "pag-badnpz", "video_constants_single.npz", npz[: len(npz) // 2])
    nso = build_nso(b / "nso-badmanifest")
    shutil.copytree(nso, b / "nso-badnpz")
    _damage(nso, "manifest.json", b'{"constants": "constants.npz",')
    _damage(b / "nso-badnpz", "constants.npz", b"PK\x03\x04 not really a zip")
    _damage(build_jax_video(b / "jax-badjson"), "constants.json", b"[1, 2")
    hf = build_hf_tracker(b / "onnxdir")
    shutil.copytree(hf, b / "two")
    (hf / "extra.onnx").mkdir()
    for f in list((b / "two").glob("*.onnx")):
        shutil.copy(f, f.with_name("copy_" + f.name))

    stack = np.stack([planted_image()[..., 0].astype(np.uint16) * 100 + 500] * 3)
    stack[1, :20] += 700  # slices differ
    tifffile.imwrite(d / "cells.tif", stack, photometric="minisblack")
    whole = (d / "cells.tif").read_bytes()
    (d / "trunc.tif").write_bytes(whole[: len(whole) * 6 // 10])
    rr, cc = np.mgrid[:60, :90]
    blob = np.zeros((8, 60, 90), np.uint8)
    for z in range(8):
        blob[z][(rr - (10 + z)) ** 2 + (cc - (14 + 3 * z)) ** 2 <= 36] = 200
    tifffile.imwrite(d / "p.tif", blob, photometric="minisblack")
    tifffile.imwrite(d / "seeds.tif", (blob > 0).astype(np.uint16), photometric="minisblack")
    tifffile.imwrite(d / "empty.tif", np.zeros((60, 90), np.uint16), photometric="minisblack")
    np.save(d / "arr.npy", stack)
    np.save(d / "zero.npy", np.zeros((0, 0), np.uint8))
    np.save(d / "str.npy", np.array([["a", "b"], ["c", "d"]]))
    (d / "old.tif").write_bytes(b"yesterday's labels")
    (d / "o.tif.partial").write_bytes(b"a file the user named .partial")
    (d / "dir.tif").mkdir()
    (d / "dir.tif" / "keep.txt").write_text("mine")
    (d / "notes.zarr").mkdir()
    (d / "notes.zarr" / "readme.txt").write_text("mine")
    (d / "sub").mkdir()
    (d / "sub" / "notes.txt").write_text("a folder of the user's")
    os.symlink(d / "cells.tif", d / "link.tif")
    (d / "loop").mkdir()
    os.symlink("b.tif", d / "loop" / "a.tif")
    os.symlink("a.tif", d / "loop" / "b.tif")
    zarr.open_group(str(d / "emb.zarr"), mode="w")
    return root


@pytest.fixture(scope="module")
def results(tree):
    cases = [{"id": cid, "argv": [a.format(d=tree / "data", b=tree / "bundles") for a in argv],
              "no_distributed": cid.startswith("no-distributed")} for cid, argv, *_ in CASES]
    spec = tree / "cases.json"
    spec.write_text(json.dumps({"root": str(tree), "cases": cases}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("NAPARI_SAM3_ONNX_DEBUG", None)
    done = subprocess.run([sys.executable, str(HERE / "_hostile_driver.py"), str(spec)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tree)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(("cid", "argv", "code", "words", "may_change"), CASES,
                         ids=[c[0] for c in CASES])
def test_hostile_command_line(results, tree, cid, argv, code, words, may_change):
    got = results[cid]
    err = got["stderr"]
    assert "Traceback" not in err, err
    assert got["code"] == code, err
    assert words.format(d=tree / "data") in err, err
    if code != 0:
        assert len([ln for ln in err.splitlines() if "error:" in ln]) == 1, err  # one line
    allowed = {str(tree / "data" / p) for p in may_change}
    assert set(got["changed"]) <= allowed, got["changed"]


def test_successful_cases_did_what_they_say(results, tree):
    d = tree / "data"
    assert (d / "o.tif.partial").read_bytes() == b"a file the user named .partial"
    assert tifffile.imread(d / "o.tif").shape == (3, 60, 90)
    assert tifffile.imread(d / "old.tif").shape == (3, 60, 90)  # replaced with --overwrite
    assert not list(d.glob(".*partial"))  # no temporary left behind
    assert not (d / "never.zarr").exists()  # the output folder was checked before the store
    out = results["tiles-not-slices"]["stdout"]
    assert "tiles of 3 slices" in out, out  # 60 x 90 planes in 40-px tiles: 6 tiles each
    labels = tifffile.imread(d / "two.tif")
    assert set(np.unique(labels[3])) >= {1} or set(np.unique(labels[3])) >= {2}
