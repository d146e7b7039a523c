"""Counts and messages that add up (propagation progress and summaries, encodes per run)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from napari_sam3_onnx._napari.layers import slice_ref

from .test_propagation_gui import BLOB_A, Z, centre, click, open_tab, run_and_wait, scene, use_ids

pytestmark = pytest.mark.gui


def test_progress_counts_each_slice_once(make_widget, qtbot):
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A))
    click(qtbot, viewer, w, 5, centre(BLOB_A, 5))
    shown = []
    panel.progress.valueChanged.connect(shown.append)
    use_ids(panel, "1")
    run_and_wait(qtbot, panel)
    assert panel.progress.maximum() == Z
    # from 0 to Z, once per batch of slices (paced), never back; the seed slice is not counted
    # twice (the bar's text would read Z + 1 / Z)
    assert shown[0] == 0 and shown[-1] == Z, shown
    assert shown == sorted(set(shown)), shown
    assert panel.progress.format() == f"{Z} / {Z} slices"


def test_a_pass_that_ends_without_the_object_says_so(make_widget, qtbot):
    blob = (*BLOB_A[:5], range(4, Z))  # nothing below z=4
    viewer, w, panel = open_tab(make_widget, scene(blob))
    click(qtbot, viewer, w, 6, centre(blob, 6))
    use_ids(panel, "1")
    panel.stop_after.setValue(0)  # never stop: the down pass walks to z=0
    run_and_wait(qtbot, panel)
    text = panel.status.text()
    assert "down: reached the range end at z=0, last seen z=4" in text, text
    assert "up: range end at z=11" in text, text
    processed = int(text.split(": ")[1].split(" slice")[0])
    assert processed == Z and f"{Z} slice(s) processed ({Z - 1} newly encoded" in text


def test_a_run_counts_only_its_own_encodes(make_widget, qtbot):
    stack = np.zeros((3, 40, 70), np.uint16)
    _viewer, image, w = make_widget(stack)
    encoder = w.session.encoder
    refs = [slice_ref(image, (z,), 0) for z in range(3)]
    counts = {}

    def in_thread(name, todo):
        def work():
            before = encoder.thread_encoder_calls()
            for ref in todo:
                encoder.embed(ref)
            counts[name] = encoder.thread_encoder_calls() - before
        t = threading.Thread(target=work)
        t.start()
        t.join()

    in_thread("other", [refs[0]])  # the click preview (or another tab) encodes z=0
    in_thread("run", [refs[0], refs[1]])  # z=0 cached: not this run's encode
    in_thread("other2", [refs[2]])
    assert (counts["run"], counts["other"] + counts["other2"], encoder.encoder_calls) == (1, 2, 3)


def test_one_status_line_and_pop_ups_only_for_warnings(make_widget, qtbot, monkeypatch):
    from napari_sam3_onnx._napari import widget as widget_module

    toasts = []
    monkeypatch.setattr(widget_module, "show_info", toasts.append)
    viewer, w, panel = open_tab(make_widget, scene(BLOB_A))
    assert click(qtbot, viewer, w, 5, centre(BLOB_A, 5)) == [1]
    assert "Committed" in w.status.text() and not toasts  # routine news: no pop-up
    use_ids(panel, "1")
    run_and_wait(qtbot, panel)
    assert w.status.text().startswith("Done") and panel.status is w.status  # no stale line
    assert not toasts
    use_ids(panel, "9")  # not on this slice: that stops the user, so it pops up
    assert not panel.run()
    assert toasts and toasts[-1] == w.status.text()
