"""Regenerate every documentation screenshot with the real widget, in one first session.

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshots.py

Does what a newcomer does after the README's first command (the synthetic nuclei sample, the
SAM 3 dock, the toy model; no weights, not SAM 3) and saves a picture after each step into
``docs/images/``:

* ``first-session-open.png``: the window as the README's first command opens it;
* ``clicks-and-boxes.png``: two nuclei committed with one click each, a third previewed from a
  rectangle plus a click;
* ``text-prompts.png``: the Text tab after searching all slices for "nucleus" at the default
  floor, the status bar showing the hovered instance's table row;
* ``first-session-automatic.png``: the Automatic tab's preview of the shown slice at SAM's
  default settings, one object per nucleus;
* ``first-session-propagate.png``: the Propagate tab after carrying the committed nuclei
  through the stack, seen on another slice;
* ``propagation.png``: the propagated objects in napari's 3-D view;
* ``series.png``: the dock's series mode on a folder of four sample images of different sizes,
  two done (saved when the user moved on), the third with one nucleus committed and one
  previewed.

``python scripts/screenshots.py series`` makes the last one only.

docs/first-session.md walks through the same steps. Every setting is the tab's default unless
a step says otherwise. Exits non-zero (and writes nothing more) when a step finds nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
PLANE = 5  # the slice the sample opens on
OTHER_PLANE = 2
SIZE = (1500, 950)


def _wait(app, done, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the widget did not finish in time")
        app.processEvents()
        time.sleep(0.02)


def _pump(app, rounds: int = 25) -> None:
    for _ in range(rounds):
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


def _save(app, viewer, name: str) -> Path:
    _close_notifications(viewer)
    _pump(app)
    if viewer.dims.ndisplay == 2:  # fit the whole slice once the dock has its final width
        viewer.reset_view()
        _pump(app, 5)
    path = IMAGES / name
    IMAGES.mkdir(parents=True, exist_ok=True)
    viewer.window.screenshot(str(path), canvas_only=False)
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def _rectangle(z: int, mask: np.ndarray, pad: int = 4) -> np.ndarray:
    rows, cols = np.nonzero(mask)
    r0, r1, c0, c1 = rows.min() - pad, rows.max() + pad, cols.min() - pad, cols.max() + pad
    return np.array([[z, r0, c0], [z, r0, c1], [z, r1, c1], [z, r1, c0]], float)


def main() -> int:
    """Run the first session and write the pictures."""
    from qtpy.QtWidgets import QApplication

    from napari_sam3_onnx._napari.launch import open_viewer
    from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

    viewer, widget = open_viewer(test_bundle=True, show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(*SIZE)
    viewer.dims.set_current_step(0, PLANE)
    viewer.reset_view()
    session, lay = widget.session, widget.session.layers
    _, truth = synthetic_nuclei()
    ids = [int(i) for i in np.unique(truth[PLANE]) if i]
    centres = [np.argwhere(truth[PLANE] == i).mean(axis=0) for i in ids]
    _save(app, viewer, "first-session-open.png")

    def settle() -> None:
        _wait(app, lambda: not session.pending)

    # Clicks and boxes: one click per nucleus, committed with c; then a box plus a click.
    for r, c in centres[:2]:
        lay.points.add([PLANE, r, c])
        settle()
        widget.commit()
        settle()
    lay.shapes.add(_rectangle(PLANE, truth[PLANE] == ids[2]), shape_type="rectangle")
    lay.points.add([PLANE, *centres[2]])
    settle()
    if not lay.preview.data[PLANE].any():
        print("the box and click previewed nothing", file=sys.stderr)
        return 1
    viewer.layers.selection.active = lay.points
    _save(app, viewer, "clicks-and-boxes.png")
    widget.commit()
    settle()

    # Text: "nucleus" on every slice at the default floor.
    text = widget.panels["Text"]
    widget.show_tab("Text")
    text.concepts.setText("nucleus")
    text.scope.set_mode("all")
    text.run()
    _wait(app, lambda: not text.running, timeout=120.0)
    found = viewer.layers[-1]
    if not found.data[PLANE].any():
        print(f"the text search found nothing: {text.messages[-1:]}", file=sys.stderr)
        return 1
    viewer.layers.selection.active = found
    sizes = np.bincount(found.data[PLANE].ravel())
    sizes[0] = 0
    rows, cols = np.nonzero(found.data[PLANE] == int(sizes.argmax()))
    viewer.mouse_over_canvas = True
    viewer.cursor.position = found.data_to_world((PLANE, rows.mean(), cols.mean()))
    viewer.update_status_from_cursor()
    _save(app, viewer, "text-prompts.png")
    found.visible = False

    # Automatic: the shown slice at SAM's default settings, previewed, then discarded.
    auto = widget.panels["Automatic"]
    widget.show_tab("Automatic")
    auto.run()
    _wait(app, lambda: not auto.running, timeout=300.0)
    shown = len(np.unique(auto.output.preview.data[PLANE])) - 1 if auto.output else 0
    if shown != len(ids):
        print(f"automatic found {shown} of {len(ids)}: {auto.messages[-1:]}", file=sys.stderr)
        return 1
    _save(app, viewer, "first-session-automatic.png")
    auto.discard()

    # Propagate: the committed nuclei through the whole stack (memory graphs).
    prop = widget.panels["Propagate"]
    widget.show_tab("Propagate")
    prop.from_all.setChecked(True)
    if not prop.run():
        print(f"propagation did not start: {prop.status.text()}", file=sys.stderr)
        return 1
    _wait(app, lambda: not prop.running, timeout=120.0)
    if len(np.unique(lay.target.data[[0, 11]])) < 2:
        print("nothing was propagated", file=sys.stderr)
        return 1
    for layer in (lay.points, lay.shapes, lay.preview):
        layer.visible = False
    viewer.layers.selection.active = lay.target
    viewer.dims.set_current_step(0, OTHER_PLANE)
    _save(app, viewer, "first-session-propagate.png")

    viewer.layers["synthetic nuclei"].opacity = 0.35
    viewer.dims.ndisplay = 3
    viewer.reset_view()
    viewer.camera.angles = (-20.0, 35.0, 130.0)
    viewer.camera.zoom *= 1.1
    _save(app, viewer, "propagation.png")
    viewer.close()
    return 0


def series() -> int:
    """The series mode: four 2-D sample images in a folder, two done, the third being worked on."""
    import tempfile

    import tifffile
    from qtpy.QtWidgets import QApplication

    from napari_sam3_onnx._napari.launch import open_viewer
    from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

    viewer, widget = open_viewer(test_bundle=True, sample=False, show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(*SIZE)
    crops = [(180, 240), (150, 220), (176, 200), (140, 236)]  # (rows, cols): all different
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "nuclei"
        folder.mkdir()
        truths = []
        for k, (rows, cols) in enumerate(crops):
            stack, truth = synthetic_nuclei(seed=k + 1)
            tifffile.imwrite(folder / f"nuclei_{k + 1:02d}.tif", stack[PLANE, :rows, :cols])
            truths.append(truth[PLANE, :rows, :cols])
        if widget.series.open(folder, out=Path(tmp) / "labels") is None:
            print(f"the series did not open: {widget.status.text()}", file=sys.stderr)
            return 1
        session = widget.session

        def click(centre) -> None:
            session.layers.points.add(list(centre))
            _wait(app, lambda: not session.pending)

        for image, truth in enumerate(truths[:3]):
            ids = [int(i) for i in np.unique(truth) if i]
            centres = [np.argwhere(truth == i).mean(axis=0) for i in ids]
            for centre in centres[: 2 if image == 2 else None]:
                click(centre)
                if not session.layers.preview.data.any():
                    print(f"image {image + 1}: a click previewed nothing", file=sys.stderr)
                    return 1
                if image < 2 or centre is centres[0]:
                    widget.commit()
            if image < 2 and not widget.series.navigator.next():
                print(f"did not move on: {widget.status.text()}", file=sys.stderr)
                return 1
        viewer.layers.selection.active = session.layers.points
        _save(app, viewer, "series.png")
    viewer.close()
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["series"]:
        sys.exit(series())
    sys.exit(main() or series())
