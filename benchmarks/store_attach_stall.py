"""How long attaching an embedding store stalls the Qt event loop: on the Qt thread vs the dock.

Usage::

    xvfb-run -a python benchmarks/store_attach_stall.py BUNDLE

``BUNDLE``'s files are linked into two fresh temporary folders, each with a copy of its
``manifest.json`` that records no file hashes, so the bundle digest is computed as for a bundle
without recorded hashes the first time it meets a store. A 10 ms ``QTimer`` ticks meanwhile:

* **on the Qt thread**: ``Workspace.attach(adapter, folder, store)`` in a timer slot (what the
  model panel did before the check moved to a worker);
* **dock**: the store chosen in a ``ModelPanel``'s Embeddings row, until it is attached.

Printed for each: the longest gap between ticks (how long the window was dead) and the time
until the store was attached. Also timed on the Qt thread, as the panel does them: opening the
bundle (graph headers) and reading its tokenizer (the language cache the Text tab builds).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from qtpy.QtCore import QEventLoop, QTimer
from qtpy.QtWidgets import QApplication

from napari_sam3_onnx._napari.model.panel import ModelPanel
from napari_sam3_onnx.api.workspace import Workspace, language_cache
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter


def linked_copy(bundle: Path, where: Path) -> Path:
    """``where`` with a link to every file of ``bundle`` and a manifest without file hashes."""
    where.mkdir()
    for path in bundle.iterdir():
        if path.is_file() and path.name != "manifest.json":
            (where / path.name).symlink_to(path.resolve())
    manifest = bundle / "manifest.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text(encoding="utf-8"))
        data.pop("files", None)
        (where / "manifest.json").write_text(json.dumps(data), encoding="utf-8")
    return where


def stall(app: QApplication, start: Callable[[], None], done: Callable[[], bool],
          timeout: float = 300.0) -> tuple[float, float]:
    """``(longest gap between 10 ms ticks, seconds until done)`` around ``start()``."""
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    t0 = time.perf_counter()
    QTimer.singleShot(0, start)
    while not done() and time.perf_counter() - t0 < timeout:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
        time.sleep(0.002)
    t1 = time.perf_counter()
    timer.stop()
    marks = [t0, *ticks, t1]
    return max(b - a for a, b in pairwise(marks)), t1 - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        sync_folder = linked_copy(args.bundle, tmp_path / "sync")
        t = time.perf_counter()
        adapter = open_adapter(sync_folder)
        print(f"open_adapter (graph headers, Qt thread in the panel): "
              f"{time.perf_counter() - t:.2f} s")
        if adapter.has(Capability.TEXT):
            t = time.perf_counter()
            language_cache(adapter, sync_folder)
            print(f"language cache (tokenizer read, Qt thread in the Text tab): "
                  f"{time.perf_counter() - t:.2f} s")
        ws, attached = Workspace(), []
        gap, took = stall(app, lambda: attached.append(
            ws.attach(adapter, sync_folder, tmp_path / "sync.zarr", write=True)),
            lambda: bool(attached))
        print(f"on the Qt thread: longest stall {gap:.3f} s, attached after {took:.2f} s")

        dock_folder = linked_copy(args.bundle, tmp_path / "dock")
        panel = ModelPanel(lambda: None, lambda _n: None, print)
        panel.load(dock_folder)
        gap, took = stall(app, lambda: panel.store.attach(tmp_path / "dock.zarr", write=True),
                          lambda: panel.checking is None and panel.workspace.store is not None)
        print(f"dock:             longest stall {gap:.3f} s, attached after {took:.2f} s")


if __name__ == "__main__":
    main()
