"""Screenshots of working on existing labels, with the real widget and the toy models.

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshots_labels.py

A "Cellpose-like" labels layer is made from the synthetic nuclei's ground truth, with one
nucleus cut in half on the plane shown, and saved pictures go to ``docs/images/``:

* ``refine-label.png``: the half nucleus picked in the Clicks tab ("Refine a label") and one
  positive click on its missing half: the preview is the whole nucleus (toy tracker model, whose
  point decoder takes no mask prompt: the panel says so);
* ``repropagate-label.png``: that label re-propagated through z from this plane in the
  Propagate tab ("Label ids on this slice"), seen on another plane (shipped toy model, memory);
* ``like-these.png``: two annotated nuclei on one plane as exemplars in the "Like these" tab,
  through the stack: every nucleus found, one id per object in 3-D.

Toy models, not SAM 3: the pictures show the workflow, not SAM 3's quality. Exits non-zero
when a step finds nothing.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import SIZE, _pump, _save, _wait

PLANE, OTHER = 6, 9


def show_plane(viewer, z: int) -> None:
    """Show data plane ``z`` of the sample (its z axis is scaled in world units)."""
    image = viewer.layers["synthetic nuclei"]
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])


def main() -> int:
    """Run the three steps and write the pictures."""
    from qtpy.QtWidgets import QApplication

    from napari_sam3_onnx._napari.launch import open_viewer
    from napari_sam3_onnx.models.base import Capability
    from napari_sam3_onnx.samples.synthetic import synthetic_nuclei
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    viewer, widget = open_viewer(show=True)
    app = QApplication.instance()
    viewer.window._qt_window.resize(*SIZE)
    session = widget.session
    _, truth = synthetic_nuclei()
    cut = truth.copy()
    sizes = np.bincount(truth[PLANE].ravel())
    sizes[0] = 0
    oid = int(sizes.argmax())
    mid = int(np.median(np.nonzero(truth[PLANE] == oid)[1]))
    cut[PLANE][(truth[PLANE] == oid) & (np.arange(truth.shape[2])[None, :] > mid)] = 0
    sample = viewer.layers["synthetic nuclei"]
    cellpose = viewer.add_labels(cut, name="cellpose", opacity=0.6, scale=sample.scale,
                                 translate=sample.translate)
    show_plane(viewer, PLANE)

    # 1. Refine: the toy tracker (no mask prompt), the half label picked, one click.
    tracker = build_hf_tracker(Path(tempfile.mkdtemp()) / "toy-tracker")
    widget.load_bundle(tracker, toy=True)
    _wait(app, lambda: session.encoder is not None)
    widget.show_tab("Clicks & boxes")
    show_plane(viewer, PLANE)
    _pump(app)
    if session.pick(cellpose, oid) is None:
        print(f"the label was not picked: {session.messages[-1:]}", file=sys.stderr)
        return 1
    _wait(app, lambda: not session.pending)
    missing = (truth[PLANE] == oid) & (cut[PLANE] == 0)
    r, c = np.argwhere(missing).mean(axis=0)
    session.layers.points.add([PLANE, r, c])
    _wait(app, lambda: not session.pending)
    if not (session.layers.preview.data[PLANE] > 0)[missing].mean() > 0.5:
        got = session.layers.preview.data[PLANE] > 0
        print(f"the click did not restore the missing half: {got[missing].mean():.2f} of it, "
              f"{got.sum()} px previewed, {session.messages[-2:]}", file=sys.stderr)
        return 1
    _save(app, viewer, "refine-label.png")
    widget.commit()
    _wait(app, lambda: not session.pending)

    # 2. Re-propagate that label through z with the shipped toy (memory graphs).
    widget.model.load_toy()
    _wait(app, lambda: session.encoder is not None and widget.workspace.has(Capability.MEMORY),
          timeout=180.0)
    widget.target.setCurrentIndex(widget.target.findText("cellpose"))
    prop = widget.panels["Propagate"]
    widget.show_tab("Propagate")
    prop.from_ids.setChecked(True)
    prop.ids.setText(str(oid))
    if not prop.run():
        print(f"propagation did not start: {prop.status.text()}", file=sys.stderr)
        return 1
    _wait(app, lambda: not prop.running, timeout=180.0)
    for layer in (session.layers.points, session.layers.shapes, session.layers.preview):
        layer.visible = False
    viewer.layers.selection.active = cellpose
    show_plane(viewer, OTHER)
    _save(app, viewer, "repropagate-label.png")

    # 3. Like these: two annotated nuclei on one plane, through the stack.
    annotated = np.zeros_like(truth)
    ids = [int(i) for i in np.unique(truth[PLANE]) if i][:2]
    for i in ids:
        annotated[PLANE][truth[PLANE] == i] = i
    viewer.add_labels(annotated, name="annotated", scale=sample.scale, translate=sample.translate)
    cellpose.visible = False
    like = widget.panels["Like these"]
    widget.show_tab("Like these")
    like.source.setCurrentIndex(like.source.findText("annotated"))
    like.ids.setText(", ".join(map(str, ids)))
    like.through.setChecked(True)
    show_plane(viewer, PLANE)
    if not like.run():
        print(f"the search did not start: {like.note.text()}", file=sys.stderr)
        return 1
    _wait(app, lambda: not like.running, timeout=300.0)
    _pump(app)
    if like.last is None or not like.last.objects:
        print(f"nothing like the exemplars was found: {like.note.text()}", file=sys.stderr)
        return 1
    viewer.layers["annotated"].visible = False
    show_plane(viewer, OTHER)
    _save(app, viewer, "like-these.png")
    viewer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
