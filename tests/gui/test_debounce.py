"""The first prompt after a quiet spell runs at once; quick follow-ups are debounced."""

from __future__ import annotations

import time

import pytest

from napari_sam3_onnx._napari.clicks.session import DEBOUNCE_MS

from .gui_helpers import blob_stack, settle

pytestmark = [pytest.mark.gui, pytest.mark.quiet]


def test_leading_prompt_runs_without_waiting_and_followups_wait(make_widget, qtbot):
    stack, _truth, _centre = blob_stack()
    _viewer, _image, w = make_widget(stack)
    session = w.session
    settle(qtbot, session)
    session._debounce.last_run = time.monotonic() - 10  # a quiet spell
    session.schedule()
    assert session._debounce.active and session._debounce.interval == 0
    session.schedule()  # more events of the same user action: the immediate run still stands
    assert session._debounce.interval == 0
    settle(qtbot, session)
    session.schedule()  # right after a run: wait for the quiet time
    assert session._debounce.active and session._debounce.interval == DEBOUNCE_MS
    settle(qtbot, session)
