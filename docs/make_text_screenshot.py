"""Render the Text tab screenshot with the real widget (run under a display or Xvfb).

    xvfb-run -a -s "-screen 0 1600x1000x24" python docs/make_text_screenshot.py

Opens napari with the "Synthetic nuclei (uint16 z-stack)" sample and the widget, loads a toy
concept bundle (samexporter layout, raw heads, with the toy tokenizer; no weights needed, not
SAM 3), searches all slices for "nucleus" with a 0.2 floor and saves
``docs/images/text-prompts.png`` showing the tab, the labelled instances of one plane and the
status bar's table row of the instance under the cursor.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "images" / "text-prompts.png"
PLANE = 6


def _wait(app, done, timeout=120.0) -> None:
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
    from napari_sam3_onnx.testing.geometry import TestGeometry
    from napari_sam3_onnx.testing.tokenizer import build_text_bundle

    folder = build_text_bundle(Path(tempfile.mkdtemp(prefix="sam3-text-toy-")), "samexporter",
                               TestGeometry(grid=24))  # 336-px input, 96-px masks
    viewer, widget = open_viewer(show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(1500, 950)
    widget.load_bundle(folder, toy=True)
    panel = widget.panels["Text"]
    widget.tabs.setCurrentWidget(panel)
    viewer.dims.set_current_step(0, PLANE)
    panel.concepts.setText("nucleus")
    panel.floor.set_value(0.2)
    panel.min_size.setValue(20)
    panel.fill_holes.setChecked(True)
    panel.scope.set_mode("all")
    panel.run()
    _wait(app, lambda: not panel.running)
    out = viewer.layers[-1]
    assert out.data[PLANE].any(), "no instance to show"
    viewer.layers.selection.active = out
    viewer.reset_view()
    # hover the largest instance of the plane: the status bar shows its row of the table
    ids, counts = np.unique(out.data[PLANE][out.data[PLANE] > 0], return_counts=True)
    rows, cols = np.nonzero(out.data[PLANE] == ids[np.argmax(counts)])
    viewer.mouse_over_canvas = True
    viewer.cursor.position = out.data_to_world((PLANE, rows.mean(), cols.mean()))
    viewer.update_status_from_cursor()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    viewer.window.screenshot(str(OUT), canvas_only=False)
    print(f"wrote {OUT.relative_to(HERE.parent)}: {panel.messages[-1]}")
    viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
