"""SIGTERM and SIGHUP end a run as Ctrl+C does: work kept, partial files gone, a true account."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile

from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

SRC = Path(__file__).parent.parent / "src"

#: The child: the second encode announces itself and then takes "forever" (until the signal).
CHILD = """
import sys, time
from pathlib import Path
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.models.bundle import open_adapter
ready, bundle, argv = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
cls = type(open_adapter(bundle))
real, calls = cls.encode, []
def slow(self, rgb):
    calls.append(1)
    if len(calls) == 2:
        ready.write_text("encoding the second slice")
        time.sleep(120)
    return real(self, rgb)
cls.encode = slow
sys.exit(main(argv))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("signals")
    wk = build_wkentaro_v03(root / "wk")
    write_toy_tokenizer(wk)
    stack = np.stack([planted_image()[..., 0]] * 3)
    tifffile.imwrite(root / "cells.tif", stack, photometric="minisblack")
    return root, wk


def interrupt(root: Path, wk: Path, argv: list, signum: int) -> tuple[int, str]:
    ready = root / "ready"
    ready.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(ready), str(wk), *map(str, argv)],
                             stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child never reached the second slice"
        time.sleep(0.05)
    child.send_signal(signum)
    _, err = child.communicate(timeout=60)
    return child.returncode, err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sigterm_keeps_finished_store_entries_and_says_so(setup):
    root, wk = setup
    store = root / "emb.zarr"
    code, err = interrupt(root, wk, ["precompute", wk, root / "cells.tif", "--store", store],
                          signal.SIGTERM)
    assert code == 143, err
    assert "Traceback" not in err
    assert f"interrupted (SIGTERM): kept: 1 slice embedding in {store}" in err, err
    assert "run the same command again" in err


def test_sighup_removes_the_partial_labels_and_leaves_the_old_file(setup):
    root, wk = setup
    old = root / "labels.tif"
    old.write_bytes(b"the labels from last week")
    before = digest(old)
    argv = ["text", wk, root / "cells.tif", "--concepts", "nucleus", "--out", old, "--table",
            root / "t.csv", "--overwrite"]
    code, err = interrupt(root, wk, argv, signal.SIGHUP)
    assert code == 129, err
    assert "Traceback" not in err
    assert "interrupted (SIGHUP): nothing was kept; not written: --out" in err, err
    assert digest(old) == before and not (root / "t.csv").exists()
    assert not [p.name for p in root.iterdir() if "partial" in p.name]


@pytest.mark.slow  # > 5 s (subprocesses); docs/contributing.md
def test_sigterm_during_text_with_a_store_names_what_it_kept(setup):
    root, wk = setup
    store, out = root / "text.zarr", root / "new.tif"
    argv = ["text", wk, root / "cells.tif", "--concepts", "nucleus", "--out", out, "--store",
            store]
    code, err = interrupt(root, wk, argv, signal.SIGTERM)
    assert code == 143 and "Traceback" not in err, err
    assert f"kept: 1 slice embedding in {store}" in err and f"not written: --out {out}" in err
    assert not out.exists()
