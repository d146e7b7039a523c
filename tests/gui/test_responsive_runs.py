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
from napari_sam3_onnx._napari.pacing import INTERVAL_MS, NEWS_EVERY_S, TABLE_EVERY_S, Every
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

from .gui_helpers import settle

pytestmark = [pytest.mark.gui, pytest.mark.quiet]

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
    return panel, panel.run, lambda: panel.runner.pacer


def _automatic(viewer, w):
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(4)  # a fast run: 16 clicks a slice
    panel.scope.set_mode("all")
    return panel, panel.run, lambda: panel.runner.pacer


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

    return panel, start, lambda: panel.runner.job.pacer


TABS = {"Text": _text, "Automatic": _automatic, "Propagate": _propagate}


#: Time on the test's clock between two steps of the workflow: four steps an interval.
STEP_S = INTERVAL_MS / 1e3 / 4


@pytest.mark.parametrize("tab", list(TABS))
def test_a_stack_run_applies_results_in_paced_batches(stack_dock, qtbot, tab, monkeypatch):
    """The pacer is given a clock that moves on STEP_S with every step the workflow yields
    (in the worker): by that clock results arrive four an interval, however long the loaded
    machine takes over a slice, so a run of N steps makes at most N/4 + 1 batches."""
    viewer, w, _truth = stack_dock
    now = [0.0]

    def tick(_step):
        now[0] += STEP_S

    produced = {"n": 0, "at_click": None, "button": None, "steps": []}
    _count_steps(monkeypatch, tab, produced, click=False, on_step=tick)
    panel, start, pacer_of = TABS[tab](viewer, w)
    pacer = pacer_of()
    monkeypatch.setattr(pacer, "clock", lambda: now[0])
    settle(qtbot, w.session, timeout=20000)
    applied: list[tuple[int, float, int]] = []  # (batch, test clock, results) per chunk
    inner = pacer._apply
    monkeypatch.setattr(pacer, "_apply", lambda items: (
        applied.append((pacer.batches, now[0], len(items))), inner(items)))
    start()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    n = len(produced["steps"])
    assert n >= NZ  # every slice (propagation: the seed's step too)
    firsts = {b: t for b, t, _ in reversed(applied)}  # each batch's first chunk
    assert pacer.batches == len(firsts)
    assert 1 <= pacer.batches <= n * STEP_S / (INTERVAL_MS / 1e3) + 1, (pacer.batches, n)
    # at most one batch per interval while running (the last is the run's end)
    gaps = np.diff([firsts[b] for b in sorted(firsts)][:-1])
    assert (gaps >= INTERVAL_MS / 1e3 - 1e-9).all(), gaps
    assert sum(k for _, _, k in applied) == n and pacer.pending == 0  # the end has everything


@pytest.mark.parametrize("tab", list(TABS))
def test_cancel_stops_the_run_within_one_slice(stack_dock, qtbot, tab, monkeypatch):
    """The click is queued when the worker has finished CLICK_AT slices, as a user's click
    arrives: handled whenever the Qt thread next turns its event loop."""
    viewer, w, _truth = stack_dock
    produced = {"n": 0, "at_click": None, "button": None}
    _count_steps(monkeypatch, tab, produced)
    panel, start, _pacer = TABS[tab](viewer, w)
    produced["button"] = panel.cancel_button
    settle(qtbot, w.session, timeout=20000)
    start()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert produced["at_click"] == CLICK_AT
    assert produced["n"] - produced["at_click"] <= 1, produced
    assert "ancel" in w.status.text(), w.status.text()


@pytest.mark.parametrize("tab", ["Text", "Automatic"])
def test_the_features_table_is_updated_at_a_bounded_rate_and_complete_at_the_end(
        stack_dock, qtbot, tab, monkeypatch):
    """Setting ``layer.features`` costs napari 5-15 ms: not once per batch of a fast run."""
    import importlib

    viewer, w, _truth = stack_dock
    module = importlib.import_module(
        {"Text": "napari_sam3_onnx._napari.text.output",
         "Automatic": "napari_sam3_onnx._napari.automatic.output"}[tab])
    updates: list[float] = []
    inner = module.append_features
    monkeypatch.setattr(module, "append_features", lambda layer, rows: (
        updates.append(time.perf_counter()), inner(layer, rows)))
    panel, start, pacer_of = TABS[tab](viewer, w)
    settle(qtbot, w.session, timeout=20000)
    start()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    batches = pacer_of().batches
    assert len(updates) <= max(2, batches // 2), (len(updates), batches)
    gaps = np.diff(updates[:-1])  # the last is the run's end
    assert (gaps >= TABLE_EVERY_S * 0.9).all(), gaps
    layer = panel.output.preview if tab == "Automatic" else panel._run_layer
    ids = set(np.unique(np.asarray(layer.data))) - {0}
    assert ids and set(layer.features["index"]) == ids  # a row for every object shown


@pytest.mark.parametrize("tab", list(TABS))
def test_the_bar_and_status_line_change_at_a_bounded_rate(stack_dock, qtbot, tab):
    """Each change repaints the whole window (its OpenGL canvas included) at the next paint:
    at most one per NEWS_EVERY_S during a run, and the last batch's count is shown."""
    viewer, w, _truth = stack_dock
    panel, start, pacer_of = TABS[tab](viewer, w)
    values: list[tuple[float, int]] = []
    panel.progress.valueChanged.connect(lambda v: values.append((time.perf_counter(), v)))
    settle(qtbot, w.session, timeout=20000)
    start()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    batches = pacer_of().batches
    shown = [t for t, v in values if v > 0]
    # the first batch and the run's end always say the news; between them the rate holds
    assert 1 <= len(shown) <= max(2, batches // 2 + 1), (len(shown), batches)
    gaps = np.diff(shown[:-1])  # the last batch (the run's end) is always shown
    assert (gaps >= NEWS_EVERY_S * 0.9).all(), gaps
    assert values[-1][1] == panel.progress.maximum()  # every slice counted at the end


def test_every_says_yes_once_per_interval():
    now = [10.0]
    every = Every(1.0, clock=lambda: now[0])
    assert every.due() and not every.due()
    now[0] = 10.9
    assert not every.due()
    now[0] = 11.0
    assert every.due() and not every.due()


#: Slices finished when the Cancel click is queued.
CLICK_AT = 4


@pytest.mark.parametrize("tab", list(TABS))
def test_every_step_reaches_the_tab_once_and_in_order(stack_dock, qtbot, tab, monkeypatch):
    """What the workflow yields (in the worker) is what the tab applies (on the Qt thread)."""
    viewer, w, _truth = stack_dock
    produced = {"n": 0, "at_click": None, "button": None, "steps": []}
    _count_steps(monkeypatch, tab, produced, click=False)
    panel, start, pacer_of = TABS[tab](viewer, w)
    pacer = pacer_of()
    applied: list = []
    inner = pacer._apply
    monkeypatch.setattr(pacer, "_apply", lambda items: (applied.extend(items), inner(items)))
    settle(qtbot, w.session, timeout=20000)
    start()
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    assert len(produced["steps"]) >= NZ  # every slice (propagation: the seed's step too)
    assert [id(s) for s in applied] == [id(s) for s in produced["steps"]]
    assert pacer.pending == 0


def _post_click(button) -> None:
    """Queue a left click on ``button`` (thread-safe: the events wait in Qt's queue)."""
    from qtpy.QtCore import QEvent, QPointF
    from qtpy.QtGui import QMouseEvent
    from qtpy.QtWidgets import QApplication

    centre = QPointF(button.rect().center())
    for kind in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease):
        event = QMouseEvent(kind, centre, button.mapToGlobal(centre), Qt.MouseButton.LeftButton,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
        QApplication.postEvent(button, event)


def _count_steps(monkeypatch, tab, produced, click: bool = True, on_step=None) -> None:
    """Count the steps the tab's workflow generator yields (in the worker); queue the click.

    ``on_step(step)``, when given, is called in the worker before each step is yielded.
    """
    import importlib

    module, name = {"Text": ("napari_sam3_onnx._napari.text.panel", "iter_search"),
                    "Automatic": ("napari_sam3_onnx._napari.automatic.panel",
                                  "iter_segment_refs"),
                    "Propagate": ("napari_sam3_onnx._napari.propagate.run",
                                  "iter_propagate")}[tab]
    mod = importlib.import_module(module)
    inner = getattr(mod, name)

    def counted(*args, **kwargs):
        steps = inner(*args, **kwargs)
        while True:
            try:
                step = next(steps)
            except StopIteration as end:
                return end.value  # the workflow's result (propagation returns one)
            produced["n"] += 1
            produced.setdefault("steps", []).append(step)
            if click and produced["n"] == CLICK_AT:
                produced["at_click"] = produced["n"]
                _post_click(produced["button"])
            if on_step is not None:
                on_step(step)
            yield step

    monkeypatch.setattr(mod, name, counted)
