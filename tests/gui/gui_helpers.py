"""Helpers for the widget tests: an asymmetric blob stack, IoU, waiting for the session."""

from __future__ import annotations

import numpy as np

SHAPE = (5, 60, 90)


def blob_stack(shape=SHAPE, value=3000, dtype=np.uint16):
    """An asymmetric stack: on plane z, blob A at (15, 20 + 5z) r6 and blob B at (42, 70 - 4z) r7.

    Returns the stack and a function ``truth(z, which)`` giving each blob's disc on a plane.
    """
    nz, rows, cols = shape
    rr, cc = np.mgrid[:rows, :cols]
    stack = np.zeros(shape, dtype)

    def centre(z, which):
        return (15, 20 + 5 * z, 6) if which == "A" else (42, 70 - 4 * z, 7)

    def truth(z, which):
        r, c, rad = centre(z, which)
        return (rr - r) ** 2 + (cc - c) ** 2 <= rad**2

    for z in range(nz):
        stack[z][truth(z, "A") | truth(z, "B")] = value
    return stack, truth, centre


def iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def settle(qtbot, session, timeout=5000):
    """Wait until the debounce timer has fired and every job has come back."""
    qtbot.wait(10)
    qtbot.waitUntil(lambda: not session.pending, timeout=timeout)
