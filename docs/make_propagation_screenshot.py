"""Render the propagation screenshot with the real widget (run under a display or Xvfb).

    xvfb-run -a -s "-screen 0 1600x1000x24" python docs/make_propagation_screenshot.py

Opens napari with the "Synthetic nuclei (uint16 z-stack)" sample and the widget, loads the toy
test model (no weights needed; it has no memory graphs, so the tab runs prompt carry-over),
commits four nuclei on plane z=6 with one click each, propagates all of them through the stack
from the "Propagate" tab, then shows the labels in napari's 3-D view and saves
``docs/images/propagation.png``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "images" / "propagation.png"
PLANE = 6


def _wait(app, done, timeout=60.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the widget did not finish in time")
        app.processEvents()
        time.sleep(0.02)


def _close_notifications(viewer) -> None:
    """Close the notification toasts so they do not cover the canvas."""
    try:
        from napari._qt.dialogs.qt_notification import NapariQtNotification
    except ImportError:  # another napari layout: keep them
        return
    for toast in viewer.window._qt_window.findChildren(NapariQtNotification):
        toast.close()


def main() -> int:
    """Build the scene, propagate, and write the screenshot."""
    from qtpy.QtWidgets import QApplication

    from napari_sam3_onnx._napari.launch import open_viewer
    from napari_sam3_onnx.engine.synthetic import synthetic_nuclei

    viewer, widget = open_viewer(test_bundle=True, show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(1500, 950)
    viewer.dims.set_current_step(0, PLANE)
    session, lay = widget.session, widget.session.layers
    _, truth = synthetic_nuclei()
    ids = [i for i in np.unique(truth[PLANE]) if i][:4]
    for i in ids:  # one click per nucleus, committed
        r, c = np.argwhere(truth[PLANE] == i).mean(axis=0)
        lay.points.add([PLANE, r, c])
        _wait(app, lambda: not session.pending)
        widget.commit()
        _wait(app, lambda: not session.pending)

    panel = widget.panels["Propagate"]
    widget.tabs.setCurrentWidget(panel)
    panel.from_all.setChecked(True)
    assert panel.run(), panel.status.text()
    _wait(app, lambda: not panel.running)
    print(panel.status.text())
    assert len(np.unique(lay.target.data[[0, 11]])) > 1, "nothing was propagated"

    for layer in (lay.points, lay.shapes, lay.preview):
        layer.visible = False
    image = viewer.layers["synthetic nuclei"]
    image.opacity = 0.35
    viewer.layers.selection.active = lay.target
    viewer.dims.ndisplay = 3
    viewer.reset_view()
    viewer.camera.angles = (-20.0, 35.0, 130.0)
    viewer.camera.zoom *= 1.1
    _close_notifications(viewer)
    for _ in range(30):
        app.processEvents()
        time.sleep(0.02)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    viewer.window.screenshot(str(OUT), canvas_only=False)
    print(f"wrote {OUT.relative_to(HERE.parent)}")
    viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
