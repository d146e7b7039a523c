"""Render the Automatic tab screenshot with the real widget (run under a display or Xvfb).

    pip install --no-deps stardist   # the DSB 2018 sample with its masks
    xvfb-run -a -s "-screen 0 1600x1000x24" python docs/make_automatic_screenshot.py

Opens napari with the DSB 2-D sample (image + ground truth) and the widget, loads the toy
tracker graphs with steep logits (``testing.automatic``, full SAM 3 geometry; no weights, not
SAM 3: the toy takes the bright pixels around each click), previews an automatic segmentation
with a 24 x 24 grid, commits it, evaluates it against the ground truth, and saves
``docs/images/automatic.png``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "images" / "automatic.png"


def _wait(app, done, timeout=900.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the widget did not finish in time")
        app.processEvents()
        time.sleep(0.02)


def main() -> int:
    """Build the scene and write the screenshot."""
    from qtpy.QtWidgets import QApplication

    from napari_sam3_onnx._napari.ground_truth_samples import dsb2d_sample
    from napari_sam3_onnx._napari.launch import open_viewer
    from napari_sam3_onnx.testing.automatic import build_sloped_tracker
    from napari_sam3_onnx.testing.geometry import TestGeometry

    folder = build_sloped_tracker(Path(tempfile.mkdtemp(prefix="sam3-auto-toy-")),
                                  TestGeometry(grid=72, channels=(2, 2, 2)))
    viewer, widget = open_viewer(sample=False, show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(1500, 950)
    for data, meta, kind in dsb2d_sample():
        getattr(viewer, f"add_{kind}")(data, **meta)
    widget.load_bundle(folder, toy=True)
    widget.image.setCurrentIndex(widget.image.findText("dsb2d image"))
    panel = widget.panels["Automatic"]
    widget.tabs.setCurrentWidget(panel)
    panel.fold.setChecked(True)
    panel.settings.points_per_side.setValue(24)
    panel.run()
    _wait(app, lambda: not panel.running)
    panel.commit()
    panel._layers_changed()
    panel.pred_layer.setCurrentIndex(panel.pred_layer.findText("SAM automatic"))
    panel.truth_layer.setCurrentIndex(panel.truth_layer.findText("dsb2d ground truth"))
    panel.evaluate()
    viewer.reset_view()
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
