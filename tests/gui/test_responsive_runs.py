"""Stack runs keep the window responsive: results at a bounded rate, Cancel within one slice.

A 40-slice stack on the shipped toy (fast: a slice every few milliseconds) in the Text,
Automatic and Propagate tabs, the dock opened the napari way. Results must reach the layers in
batches, at most one per :data:`~napari_sam3_onnx._napari.pacing.INTERVAL_MS` (no redraw per
slice). Cancel is pressed with a real mouse click once the first slices are shown; the run must
stop within one slice of it. The event loop's largest stall during such runs is a benchmark
(``benchmarks/stack_runs_ui.py``), not a timed test: this machine's load decides wall times.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from qtpy.QtCore import Qt

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.pacing import INTERVAL_MS
from napari_sam3_onnx.engine.synthetic import synthetic_nuclei

from .gui_helpers import settle

pytestmark = pytest.mark.gui

NZ = 40


@pytest.fixture
def stack_dock(make_napari_viewer):
    viewer = make_napari_viewer()
    image, truth = synthetic_nuclei((NZ, 180, 240))
    lo, hi = np.percentile(image, [0.5, 99.8])
    viewer.add_image(image, name="nuclei", contrast_limits=(float(lo), float(hi)))
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    widget.model.load_toy()
    return viewer, widget, truth


def _text(viewer, w):
    panel = w.panels["Text"]
    w.tabs.setCurrentWidget(panel)
    panel.concepts.setText("nucleus")
    panel.scope.set_mode("all")
    return panel, panel.run, lambda: panel._pacer


def _automatic(viewer, w):
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(4)  # a fast run: 16 clicks a slice
    panel.scope.set_mode("all")
    return panel, panel.run, lambda: panel._pacer


def _propagate(viewer, w):
    z = NZ // 2
    viewer.dims.set_current_step(0, z)
    _, truth = synthetic_nuclei((NZ, 180, 240))
    rr, cc = np.nonzero(truth[z] == 2)
    w.session.layers.points.add([z, rr.mean(), cc.mean()])
    panel = w.panels["Propagate"]
    panel.stop_after.setValue(0)  # walk the whole stack

    def start():
        ids = w.commit()
        w.tabs.setCurrentWidget(panel)
        panel.from_ids.setChecked(True)
        panel.ids.setText(",".join(map(str, ids)))
        assert panel.run()

    return panel, start, lambda: panel.runner._pacer


TABS = {"Text": _text, "Automatic": _automatic, "Propagate": _propagate}


@pytest.mark.parametrize("tab", list(TABS))
def test_a_stack_run_applies_results_in_paced_batches(stack_dock, qtbot, tab, monkeypatch):
    viewer, w, _truth = stack_dock
    panel, start, pacer_of = TABS[tab](viewer, w)
    pacer = pacer_of()
    settle(qtbot, w.session, timeout=20000)
    applied: list[float] = []
    inner = pacer._apply
    monkeypatch.setattr(pacer, "_apply", lambda items: (applied.append(time.perf_counter()),
                                                         inner(items)))
    start()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert 1 <= pacer.batches < NZ, pacer.batches  # a redraw per batch, not per slice
    # at most one batch per interval while running (the last is the run's end)
    gaps = np.diff(applied[:-1])
    assert (gaps >= INTERVAL_MS / 1e3 * 0.9).all(), gaps


@pytest.mark.parametrize("tab", list(TABS))
def test_cancel_stops_the_run_within_one_slice(stack_dock, qtbot, tab, monkeypatch):
    viewer, w, _truth = stack_dock
    produced = {"n": 0, "at_cancel": None}
    _count_steps(monkeypatch, tab, produced)
    panel, start, _pacer = TABS[tab](viewer, w)
    settle(qtbot, w.session, timeout=20000)
    shown = []
    panel.progress.valueChanged.connect(shown.append)
    start()
    qtbot.waitUntil(lambda: any(v > 0 for v in shown), timeout=60000)
    produced["at_cancel"] = produced["n"]
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert produced["n"] - produced["at_cancel"] <= 1, produced
    assert produced["n"] < NZ - 1


def _count_steps(monkeypatch, tab, produced) -> None:
    """Count the steps the tab's workflow generator yields (the worker's own progress)."""
    import importlib

    module, name = {"Text": ("napari_sam3_onnx._napari.text.panel", "iter_search"),
                    "Automatic": ("napari_sam3_onnx._napari.automatic.panel",
                                  "iter_segment_refs"),
                    "Propagate": ("napari_sam3_onnx._napari.propagate.run",
                                  "iter_propagate")}[tab]
    mod = importlib.import_module(module)
    inner = getattr(mod, name)

    def counted(*args, **kwargs):
        for step in inner(*args, **kwargs):
            produced["n"] += 1
            yield step

    monkeypatch.setattr(mod, name, counted)
