"""Render the documentation screenshots with the real widget (run under a display or Xvfb).

    xvfb-run -a -s "-screen 0 1600x1000x24" python docs/make_screenshots.py

Opens napari with the "Synthetic nuclei (uint16 z-stack)" sample and the "Clicks and boxes"
widget, loads the toy test model (no weights needed), commits two nuclei, previews a third
from a box plus a click, and saves ``docs/images/clicks-and-boxes.png``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "images" / "clicks-and-boxes.png"
PLANE = 6


def _wait(app, done, timeout=30.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the widget did not finish in time")
        app.processEvents()
        time.sleep(0.02)


def main() -> int:
    """Build the scene and write the screenshot."""
    from qtpy.QtWidgets import QApplication

    from napari_sam3_onnx._napari.launch import open_viewer
    from napari_sam3_onnx.engine.synthetic import synthetic_nuclei

    viewer, widget = open_viewer(test_bundle=True, show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(1500, 900)
    viewer.dims.set_current_step(0, PLANE)
    session, lay = widget.session, widget.session.layers
    _, truth = synthetic_nuclei()
    ids = [i for i in np.unique(truth[PLANE]) if i]
    centres = [np.argwhere(truth[PLANE] == i).mean(axis=0) for i in ids]

    def settle() -> None:
        _wait(app, lambda: not session.pending)

    for r, c in centres[:2]:  # two committed nuclei
        lay.points.add([PLANE, r, c])
        settle()
        widget.commit()
        settle()
    r, c = centres[2]
    rows, cols = np.nonzero(truth[PLANE] == ids[2])
    lay.shapes.add(np.array([[PLANE, rows.min() - 4, cols.min() - 4],
                             [PLANE, rows.min() - 4, cols.max() + 4],
                             [PLANE, rows.max() + 4, cols.max() + 4],
                             [PLANE, rows.max() + 4, cols.min() - 4]]), shape_type="rectangle")
    lay.points.add([PLANE, r, c])
    settle()
    assert lay.preview.data[PLANE].any(), "no preview to show"
    viewer.layers.selection.active = lay.points
    viewer.reset_view()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    viewer.window.screenshot(str(OUT), canvas_only=False)
    print(f"wrote {OUT.relative_to(HERE.parent)}")
    viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
