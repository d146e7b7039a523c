"""Interruptions at the awkward moments: during start-up imports and during a store write.

Each case runs the command line in a child process and sends the signal from inside it at a
chosen point (an import hook, or zarr's own I/O thread), so nothing depends on timing: the
child must exit 128 + the signal number with the one "interrupted" line and nothing else on
stderr (no traceback, no asyncio noise), and a store it was writing must verify clean.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile

from napari_sam3_onnx.cli.signals import Terminated
from napari_sam3_onnx.testing.pagarcia import build_pagarcia

SRC = Path(__file__).parent.parent / "src"

#: The child: a signal to itself when ``onnxruntime`` is first imported, then the CLI as
#: ``python -m napari_sam3_onnx.cli`` runs it. With "wrapped" the interrupt surfaces the way
#: it does inside a compiled module's initialisation: as an ImportError caused by it.
IMPORT_CHILD = """
import os, runpy, signal, sys, time
signum, how = int(sys.argv[1]), sys.argv[2]
sys.argv = ["napari-sam3-onnx", *sys.argv[3:]]

class Hook:
    def find_spec(self, name, path=None, target=None):
        if name != "onnxruntime":
            return None
        sys.meta_path.remove(self)
        try:
            os.kill(os.getpid(), signum)
            time.sleep(30)  # the handler interrupts this sleep
        except KeyboardInterrupt as exc:
            if how == "wrapped":
                raise ImportError("initialization failed") from exc
            raise
        return None

sys.meta_path.insert(0, Hook())
runpy.run_module("napari_sam3_onnx.cli", run_name="__main__")
"""

#: The child: zarr's I/O thread sends the signal while it writes the first chunk of the third
#: store entry, waits until the main thread's handler has run, and only then (0.5 s later)
#: writes the chunk: a clean-up that does not wait for zarr's writes leaves that chunk behind.
#: Waiting for the handler, not for a fixed time, keeps this independent of the machine's load.
STORE_CHILD = """
import asyncio, os, signal, sys, threading
import zarr.storage
from napari_sam3_onnx.cli import main
signum, argv = int(sys.argv[1]), sys.argv[2:]
handled = threading.Event()
real_signal = signal.signal

def signal_(sig, handler):
    if callable(handler):
        def wrapped(s, frame, h=handler):
            handled.set()
            return h(s, frame)
        return real_signal(sig, wrapped)
    return real_signal(sig, handler)

def on_int(s, frame):
    handled.set()
    signal.default_int_handler(s, frame)

real_signal(signal.SIGINT, on_int)
signal.signal = signal_
real, seen = zarr.storage.LocalStore.set, set()

async def set_(self, key, value):
    root = str(self.root)
    if ".nso-tmp-" in root and "/c/" in "/" + key:
        seen.add(root)
        if len(seen) == 3 and not getattr(set_, "fired", False):
            set_.fired = True
            os.kill(os.getpid(), signum)
            await asyncio.get_running_loop().run_in_executor(None, handled.wait, 120)
            await asyncio.sleep(0.5)
    return await real(self, key, value)

zarr.storage.LocalStore.set = set_
sys.exit(main(argv))
"""


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("NAPARI_SAM3_ONNX_DEBUG", None)
    return env


def _stderr_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize("how", ["plain", "wrapped"])
@pytest.mark.parametrize(("signum", "code", "name"), [
    (signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl+C"),
    (signal.SIGHUP, 129, "SIGHUP")], ids=["term", "int", "hup"])
def test_a_signal_during_the_start_up_imports_is_a_clean_interruption(tmp_path, signum, code,
                                                                      name, how):
    argv = ["doctor"]
    done = subprocess.run([sys.executable, "-c", IMPORT_CHILD, str(int(signum)), how, *argv],
                          capture_output=True, text=True, env=_env(), timeout=300,
                          cwd=tmp_path)
    assert done.returncode == code, done.stderr[-3000:]
    assert _stderr_lines(done.stderr) == [f"interrupted ({name}): nothing was kept."], \
        done.stderr[-3000:]


def test_interruption_finds_the_signal_behind_an_import_error():
    from napari_sam3_onnx.cli.signals import interruption

    try:
        try:
            raise Terminated(int(signal.SIGTERM))
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc
    except ImportError as exc:
        found = interruption(exc)
    assert isinstance(found, Terminated) and found.name == "SIGTERM"
    assert interruption(ValueError("no signal here")) is None


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupts")
    build_pagarcia(root / "pag")
    rr, cc = np.mgrid[:60, :90]
    blob = np.zeros((8, 60, 90), np.uint8)
    for z in range(8):
        blob[z][(rr - (10 + z)) ** 2 + (cc - (14 + 3 * z)) ** 2 <= 36] = 200
    tifffile.imwrite(root / "p.tif", blob, photometric="minisblack")
    return root


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                              (signal.SIGHUP, 129)], ids=["int", "term", "hup"])
def test_an_interrupted_store_write_leaves_a_verifiable_store_and_a_quiet_terminal(
        stack, tmp_path, signum, code):
    store, out = tmp_path / "emb.zarr", tmp_path / "tracks.tif"
    argv = ["propagate", stack / "pag", stack / "p.tif", "--click", "1", "3", "13", "24",
            "--out", out, "--store", store, "-q"]
    done = subprocess.run([sys.executable, "-c", STORE_CHILD, str(int(signum)),
                           *map(str, argv)], capture_output=True, text=True, env=_env(),
                          timeout=300)
    assert done.returncode == code, done.stderr[-3000:]
    lines = _stderr_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("interrupted ("), done.stderr[-3000:]
    assert "kept: 2 slice embeddings" in lines[0], lines[0]
    assert not out.exists()
    debris = [p.name for p in store.rglob(".nso-*")]
    assert not debris, debris
    verify = subprocess.run([sys.executable, "-m", "napari_sam3_onnx.cli", "store", "verify",
                             str(store)], capture_output=True, text=True, env=_env(),
                            timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
