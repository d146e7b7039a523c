"""Issue 29, items 1-3: nothing the user did not name is changed, deleted or certified.

Every command runs in a child process (``_race_driver.py``, all cases in one) and must give the
documented exit code, one error line, no traceback, and leave every file that existed before it
byte-identical. In the ``appears`` cases another program creates the output after the up-front
checks, while the command works: it must not be replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile

from napari_sam3_onnx.api.bundle_fetch import build_here
from napari_sam3_onnx.models.registry import get_bundle
from napari_sam3_onnx.testing.pagarcia import build_pagarcia
from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

HERE = Path(__file__).parent
W = ["--window", "500", "26000"]
TEXT = ["text", "{b}/wk", "{d}/cells.tif", "--concepts", "nucleus", *W]
PROP = ["propagate", "{b}/pag", "{d}/p.tif", "--click", "1", "3", "13", "24"]
AUTO = ["segment-all", "{b}/pag", "{d}/cells.tif", "--points-per-side", "4", *W]
THEIRS = "another program's file"

#: (id, argv, exit code, words in stderr, {path: text another program creates meanwhile})
CASES = [
    # --out / --table / --store inside the bundle folder: the bundle is protected like an input
    ("text-out-in-bundle", [*TEXT, "--out", "{b}/wk/labels.tif"], 2,
     "is inside the model bundle", {}),
    ("text-table-is-bundle-file", [*TEXT, "--out", "{d}/t1.tif", "--table",
                                   "{b}/wk/sam3_decoder.onnx", "--overwrite"], 2,
     "is inside the model bundle", {}),
    ("propagate-out-in-bundle", [*PROP, "--out", "{b}/pag/o.tif"], 2,
     "inside the model bundle", {}),
    ("propagate-table-is-bundle-file", [*PROP, "--out", "{d}/p1.tif", "--table",
                                        "{b}/pag/video_constants_single.npz", "--overwrite"], 2,
     "inside the model bundle", {}),
    ("segment-all-table-in-bundle", [*AUTO, "--out", "{d}/a1.tif", "--table",
                                     "{b}/pag/vision_encoder.onnx_data", "--overwrite"], 2,
     "inside the model bundle", {}),
    ("segment-all-folder-in-bundle", [*AUTO[:3], "{d}/p.tif", *AUTO[3:], "--out",
                                      "{b}/pag/outs"], 2, "inside the model bundle", {}),
    ("store-in-bundle", ["precompute", "{b}/wk", "{d}/cells.tif", *W, "--store",
                         "{b}/wk/emb.zarr"], 2, "inside the model bundle", {}),
    # an output created by someone else after the up-front check is never replaced
    ("text-out-appears", [*TEXT, "--out", "{d}/race1.tif"], 1, "appeared while this run worked",
     {"{d}/race1.tif": THEIRS}),
    ("text-table-appears", [*TEXT, "--out", "{d}/race2.tif", "--table", "{d}/race2.csv"], 1,
     "appeared while this run worked", {"{d}/race2.csv": THEIRS}),
    ("propagate-out-appears", [*PROP, "--out", "{d}/race3.tif"], 1,
     "appeared while this run worked", {"{d}/race3.tif": THEIRS}),
    ("segment-all-out-appears", [*AUTO, "--out", "{d}/race4.npy"], 1,
     "appeared while this run worked", {"{d}/race4.npy": THEIRS}),
    ("segment-all-zarr-appears", [*AUTO, "--out", "{d}/race6.zarr"], 1,
     "appeared while this run worked", {"{d}/race6.zarr": "<dir>"}),
    ("overwrite-still-replaces", [*TEXT, "--out", "{d}/race5.tif", "--overwrite"], 0, "",
     {"{d}/race5.tif": THEIRS}),
    # the toy's builds beside a new one are removed only if certainly ours and untouched
    ("fetch-toy-dest-keeps-copies", ["fetch", "toy", "--dest", "{t}"], 0, "", {}),
    # store verify --repair removes broken entries, never a folder of the user's
    ("verify-repair-user-folders", ["store", "verify", "{d}/emb.zarr", "--repair"], 0, "", {}),
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety")
    d, b, t = root / "data", root / "bundles", root / "toydest"
    for folder in (d, b, t):
        folder.mkdir()
    write_toy_tokenizer(build_wkentaro_v03(b / "wk"))
    build_pagarcia(b / "pag")
    stack = np.stack([planted_image()[..., 0].astype(np.uint16) * 100 + 500] * 3)
    stack[1, :20] += 700
    tifffile.imwrite(d / "cells.tif", stack, photometric="minisblack")
    rr, cc = np.mgrid[:60, :90]
    blob = np.zeros((8, 60, 90), np.uint8)
    for z in range(8):
        blob[z][(rr - (10 + z)) ** 2 + (cc - (14 + 3 * z)) ** 2 <= 36] = 200
    tifffile.imwrite(d / "p.tif", blob, photometric="minisblack")
    # copies of an older toy build in the folder given as --dest: one under another name, one
    # under a build's name with a note of the user's added
    build = build_here(get_bundle("toy"), root / "elsewhere")
    shutil.copytree(build, t / "my-toy-copy")
    (t / "my-toy-copy" / "notes.txt").write_text("my notes")
    shutil.copytree(build, t / "0123456789abcdef")
    (t / "0123456789abcdef" / "notes.txt").write_text("my notes too")
    # a store with folders of the user's inside an image group
    from napari_sam3_onnx import api

    api.precompute(api.open_bundle(b / "wk"), stack, d / "emb.zarr", window=(500.0, 26000.0),
                   names=["cells"])
    group = d / "emb.zarr" / "cells"
    (group / "my notes").mkdir()
    (group / "my notes" / "a.txt").write_text("keep")
    (group / "00099").mkdir()
    (group / "00099" / "b.txt").write_text("keep too")
    return root


@pytest.fixture(scope="module")
def results(tree):
    keys = {"d": tree / "data", "b": tree / "bundles", "t": tree / "toydest"}
    cases = [{"id": cid, "argv": [a.format(**keys) for a in argv],
              "appears": {p.format(**keys): text for p, text in appears.items()}}
             for cid, argv, _, _, appears in CASES]
    spec = tree / "cases.json"
    spec.write_text(json.dumps({"root": str(tree), "cases": cases}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("NAPARI_SAM3_ONNX_DEBUG", None)
    done = subprocess.run([sys.executable, str(HERE / "_race_driver.py"), str(spec)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tree)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(("cid", "argv", "code", "words", "appears"), CASES,
                         ids=[c[0] for c in CASES])
def test_nothing_the_user_did_not_name_is_touched(results, tree, cid, argv, code, words,
                                                  appears):
    got = results[cid]
    err = got["stderr"]
    assert "Traceback" not in err, err
    assert got["code"] == code, err
    assert words in err, err
    if code != 0:
        assert len([ln for ln in err.splitlines() if "error:" in ln]) == 1, err
    keys = {"d": tree / "data", "b": tree / "bundles", "t": tree / "toydest"}
    allowed = {p.format(**keys) for p in appears} if code == 0 else set()
    assert set(got["changed"]) <= allowed, got["changed"]
    for path, text in appears.items():
        path = path.format(**keys)
        if code == 0:
            assert got["after"][path] != _sha(text)  # --overwrite: replaced, as asked
        elif text == "<dir>":
            assert got["after"][path] == "dir" and not os.listdir(path)
        else:
            assert got["after"][path] == _sha(text)  # the other program's file, untouched


def test_an_output_that_appeared_is_kept_beside_it_and_named(results, tree):
    d = tree / "data"
    err = results["text-out-appears"]["stderr"]
    assert f"The result is in {d / 'race1-1.tif'}" in err, err
    assert tifffile.imread(d / "race1-1.tif").shape == (3, 60, 90)
    assert tifffile.imread(d / "race3-1.tif").shape == (8, 60, 90)
    assert np.load(d / "race4-1.npy").shape == (3, 60, 90)
    assert (d / "race2-1.csv").read_text().startswith("label")
    assert not list(d.glob(".*partial"))  # no temporary left behind
    assert not (tree / "bundles" / "pag" / "outs").exists()  # refused before it was made


def test_fetch_toy_dest_builds_beside_the_users_copies(results, tree):
    t = tree / "toydest"
    assert (t / "my-toy-copy" / "notes.txt").read_text() == "my notes"
    assert (t / "0123456789abcdef" / "notes.txt").read_text() == "my notes too"
    built = [p for p in t.iterdir() if p.name not in ("my-toy-copy", "0123456789abcdef")]
    assert len(built) == 1 and (built[0] / "manifest.json").is_file()


def test_verify_repair_leaves_the_users_folders_in_the_store(results, tree):
    group = tree / "data" / "emb.zarr" / "cells"
    assert (group / "my notes" / "a.txt").read_text() == "keep"
    assert (group / "00099" / "b.txt").read_text() == "keep too"
    assert "my notes" not in results["verify-repair-user-folders"]["stdout"]
