"""Two processes filling one store at once, on the same slices: no crash, nothing half served."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile

import napari_sam3_onnx
from conftest import blob_image
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.store.verify import verify_store

SRC = str(Path(napari_sam3_onnx.__file__).resolve().parents[1])

#: One writer: waits for the start signal, then puts and reads the same keys as the other.
WRITER = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from napari_sam3_onnx.engine.store.embedding_store import BundleTag, EmbeddingStore, EntryKey
from napari_sam3_onnx.models.base import Embedding

path, go, rounds, who = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def emb(z):
    rng = np.random.default_rng(z)
    return Embedding({"a": rng.normal(size=(1, 24, 64, 48)).astype(np.float32),
                      "b": rng.normal(size=(1, 3, 9, 7)).astype(np.float32)}, (84, 84), (60, 90))

keys = [EntryKey(f"img{z % 2}", (z,), f"f{z}") for z in range(8)]
want = {k: emb(z).features["a"] for z, k in enumerate(keys)}
while not go.exists():
    time.sleep(0.001)
store = EmbeddingStore(path, BundleTag("t", "hf-tracker", "sha256:1"))
served = wrong = 0
for r in range(rounds):
    order = list(enumerate(keys)) if who == 0 else list(enumerate(keys))[::-1]
    for z, k in order:
        store.put(k, emb(z))
        other = keys[(3 * z + r) % len(keys)]
        got = store.get(other)
        if got is not None:
            served += 1
            wrong += not np.array_equal(got.features["a"], want[other])
print(json.dumps({"served": served, "wrong": wrong, "corrupt": store.corrupt}))
"""


def start_together(argvs, go: Path, timeout=180):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for a in argvs]
    time.sleep(0.5)
    go.touch()
    outs = [p.communicate(timeout=timeout) for p in procs]
    return [(p.returncode, *o) for p, o in zip(procs, outs, strict=True)]


def files(store):
    return {p.relative_to(store).as_posix(): p.read_bytes()
            for p in sorted(store.rglob("*")) if p.is_file()}


@pytest.mark.slow  # > 5 s (subprocesses); docs/contributing.md
def test_two_processes_writing_the_same_entries_of_a_new_store(tmp_path):
    store = tmp_path / "race.zarr"  # created by both at once: the group-creation race too
    argv = [[sys.executable, "-c", WRITER, str(store), str(tmp_path / "go"), "6", str(who)]
            for who in (0, 1)]
    results = start_together(argv, tmp_path / "go")
    stats = []
    for _, out, err in results:
        assert "Traceback" not in err, err
        stats.append(json.loads(out.strip().splitlines()[-1]))
    assert all(s["wrong"] == 0 for s in stats), stats
    assert sum(s["served"] for s in stats) > 0
    report = verify_store(store)
    assert [e.state.value for e in report.entries] == ["ok"] * 8, report.entries
    assert not [p for p in store.rglob(".nso-*")]


@pytest.fixture
def tif(tmp_path):
    path = tmp_path / "walk.tif"
    data = np.stack([blob_image((60, 90), ((20 + z, 12 + 11 * z, 6),), value=900 + 350 * z,
                                dtype=np.uint16) for z in range(6)])
    tifffile.imwrite(path, data, photometric="minisblack")
    return path


@pytest.mark.slow  # > 5 s (subprocesses); docs/contributing.md
def test_two_precompute_commands_on_the_same_slices(hf_bundle, tif, tmp_path):
    single = tmp_path / "single.zarr"
    assert main(["precompute", str(hf_bundle), str(tif), "--store", str(single),
                 "--window", "0", "3000"]) == 0
    store = tmp_path / "both.zarr"
    waits = (f"import pathlib, sys, time\nwhile not pathlib.Path({str(tmp_path / 'go')!r})"
             ".exists(): time.sleep(0.001)\nfrom napari_sam3_onnx.cli import main\n"
             f"sys.exit(main(['precompute', {str(hf_bundle)!r}, {str(tif)!r}, '--store', "
             f"{str(store)!r}, '--window', '0', '3000']))\n")
    results = start_together([[sys.executable, "-c", waits]] * 2, tmp_path / "go")
    for code, out, err in results:
        assert code == 0 and "Traceback" not in err, err
        encoded, skipped = (int(out.split(w)[1].split()[0].strip(",")) for w in
                            ("encoded ", "skipped "))
        assert encoded + skipped == 6
    # every entry is whole and byte for byte what one process writes
    assert files(store) == files(single)
    assert [e.state.value for e in verify_store(store).entries] == ["ok"] * 6
