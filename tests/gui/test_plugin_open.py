"""What only shows when napari opens the widget: wrapped viewer/layer objects, exit in any order."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from napari_sam3_onnx._napari.layers import PREVIEW_NAME

from .gui_helpers import blob_stack, settle

pytestmark = pytest.mark.gui


def _items(combo):
    return [combo.itemText(i) for i in range(combo.count())]


def test_napari_hands_the_widget_wrapped_objects(make_widget):
    stack, _truth, _centre = blob_stack()
    _viewer, _image, w = make_widget(stack)
    assert type(w.viewer).__name__ == "PublicOnlyProxy"  # what the fixes below are about
    assert type(w.session.layers.preview).__name__ == "PublicOnlyProxy"


def test_the_preview_is_never_offered_as_a_target(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    text = w.panels["Text"]
    assert PREVIEW_NAME not in _items(w.target) and "SAM objects" in _items(w.target)
    assert PREVIEW_NAME not in _items(text.target)
    other = viewer.add_image(stack[:, ::-1].copy(), name="flipped")  # a new preview
    w.image.setCurrentIndex(w.image.findText(other.name))
    w.image.setCurrentIndex(0)
    previews = [la.name for la in viewer.layers if la.name.startswith(PREVIEW_NAME)]
    assert len(previews) == 1  # the other image's (scratch) preview was removed
    for combo in (w.target, text.target):
        assert not set(previews) & set(_items(combo)), _items(combo)

    lay, k = w.session.layers, 2
    lay.target = lay.preview  # even if something points the commit at the scratch layer
    viewer.dims.set_current_step(0, k)
    lay.points.add([k, *centre(k, "A")[:2]])
    settle(qtbot, w.session)
    assert w.commit() == []
    assert "scratch" in w.session.messages[-1]


def test_shift_c_after_a_commit_keeps_the_committed_object(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    lay, k = w.session.layers, 1
    viewer.dims.set_current_step(0, k)
    keys = viewer.window._qt_viewer._key_map_handler
    viewer.layers.selection.active = lay.points
    lay.points.add([k, *centre(k, "B")[:2]])
    settle(qtbot, w.session)
    keys.press_key("c")
    target = viewer.layers["SAM objects"]
    committed = target.data.copy()
    assert (committed[k] == 1).sum() > 0.75 * truth(k, "B").sum()
    keys.press_key("Shift-C")
    settle(qtbot, w.session)
    np.testing.assert_array_equal(target.data, committed)
    assert not viewer.layers[PREVIEW_NAME].data.any()


EXIT_SCRIPT = textwrap.dedent("""
    import numpy as np
    import napari
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    viewer = napari.Viewer(show=False)
    stack = np.zeros((3, 40, 70), np.uint16)
    stack[:, 10:20, 30:45] = 3000
    viewer.add_image(stack)
    _dock, widget = viewer.window.add_plugin_dock_widget({plugin!r}, {name!r})
    widget.load_bundle(build_hf_tracker({folder!r}), toy=True)
    widget.session.layers.points.add([0, 15, 37])  # an encode starts; then the script ends
""")


@pytest.mark.slow  # > 5 s (subprocesses); docs/contributing.md
def test_a_script_that_exits_without_closing_the_viewer_exits_cleanly(tmp_path):
    from .conftest import PLUGIN, dock_widget_name

    script = tmp_path / "dock_and_exit.py"
    script.write_text(EXIT_SCRIPT.format(plugin=PLUGIN, name=dock_widget_name(),
                                         folder=str(tmp_path / "toy")))
    env = dict(os.environ)
    if not env.get("DISPLAY"):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    for _ in range(3):  # the abort was intermittent (2 of 3 runs)
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr, done.stderr[-2000:]
