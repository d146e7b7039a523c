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


class Mouse:
    """Real mouse events on the viewer's canvas (through vispy, as napari's own tests send them).

    ``at(world_row, world_col)`` gives the canvas position of a world point in the 2-D view.
    """

    def __init__(self, viewer, qtbot) -> None:
        self.viewer, self.qtbot = viewer, qtbot
        self.canvas = viewer.window._qt_viewer.canvas._scene_canvas

    def at(self, row: float, col: float) -> tuple[float, float]:
        from napari_sam3_onnx._napari.clicks.fov import camera, canvas_size

        height, width = canvas_size(self.viewer)
        cam = camera(self.viewer)
        c_row, c_col = cam.center[-2:]
        return ((col - c_col) * cam.zoom + width / 2, (row - c_row) * cam.zoom + height / 2)

    def drag(self, start_rc, end_rc, steps: int = 4, pause_ms: int = 40) -> None:
        """Press at ``start_rc``, move in ``steps`` (pausing: timers fire), release at the end."""
        from vispy.app.canvas import MouseEvent

        start = self.at(*start_rc)
        self.canvas.events.mouse_press(pos=start, modifiers=(), button=1)
        self.qtbot.wait(pause_ms)  # the event loop turns while the button is down
        press = MouseEvent(pos=start, modifiers=(), button=1, type="mouse_press")
        for k in range(1, steps + 1):
            r = start_rc[0] + (end_rc[0] - start_rc[0]) * k / steps
            c = start_rc[1] + (end_rc[1] - start_rc[1]) * k / steps
            self.canvas.events.mouse_move(pos=self.at(r, c), modifiers=(), button=1,
                                          press_event=press)
            self.qtbot.wait(pause_ms)
        self.canvas.events.mouse_release(pos=self.at(*end_rc), modifiers=(), button=1)
