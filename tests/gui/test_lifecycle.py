"""Several images, deleted prompt layers and closing the widget."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx._napari.layers import same

from .gui_helpers import blob_stack, iou, settle

pytestmark = pytest.mark.gui


@pytest.mark.slow  # > 5 s (several images, one encode each); docs/contributing.md
def test_each_image_gets_its_own_layers(make_widget, qtbot):
    stack, _truth, _centre = blob_stack()
    viewer, first, w = make_widget(stack)
    own = w.session.layers
    own.points.add([0, 5, 5])  # content: these layers stay when another image is chosen
    own.shapes.add(np.array([[0, 1, 1], [0, 1, 9], [0, 9, 9], [0, 9, 1]], float),
                   shape_type="rectangle")
    own.target.data[0, 0, 0] = 1
    second = viewer.add_image(stack[:, ::-1].copy(), name="flipped")
    w.image.setCurrentIndex(w.image.findText("flipped"))
    theirs = w.session.layers
    assert same(theirs.image, second)
    assert not same(theirs.points, own.points) and not same(theirs.target, own.target)
    assert theirs.points.name == "SAM prompts (flipped)"
    w.image.setCurrentIndex(w.image.findText(first.name))
    assert same(w.session.layers.points, own.points) and same(w.session.layers.target, own.target)


def test_a_deleted_prompt_layer_comes_back_when_the_image_is_chosen_again(make_widget, qtbot):
    stack, truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    viewer.layers.remove(w.session.layers.points)
    # said at the event loop's next turn (an exit, which removes every layer, says nothing)
    qtbot.waitUntil(lambda: bool(w.session.messages)
                    and "choose the image" in w.session.messages[-1], timeout=2000)
    w.image.activated.emit(w.image.currentIndex())
    points = w.session.layers.points
    assert points in viewer.layers and points.name == "SAM prompts"
    viewer.dims.set_current_step(0, 0)
    points.add([0, *centre(0, "A")[:2]])
    settle(qtbot, w.session)
    assert iou(w.session.layers.preview.data[0] > 0, truth(0, "A")) > 0.75


def test_closing_the_widget_unbinds_keys_and_stops_listening(make_widget, qtbot):
    stack, _truth, centre = blob_stack()
    viewer, _image, w = make_widget(stack)
    points, session = w.session.layers.points, w.session
    dock, = [d for d in viewer.window._dock_widgets.values() if d.widget() is w]
    viewer.window.remove_dock_widget(dock)
    del dock, w
    qtbot.waitUntil(lambda: session.layers is None, timeout=3000)
    keys = viewer.window._qt_viewer._key_map_handler
    viewer.layers.selection.active = points
    keys.press_key("t")  # nothing bound any more: no call into a deleted widget
    keys.press_key("c")
    points.add([0, *centre(0, "A")[:2]])
    qtbot.wait(300)
    assert not session.pending and session._running == 0
    assert not np.any(viewer.layers["SAM preview"].data)


def test_detector_only_bundle_answers_boxes_and_explains_clicks(make_widget, qtbot, tmp_path):
    import gzip

    from napari_sam3_onnx.testing.scenes import BLOBS, planted_image
    from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

    folder = build_wkentaro_v03(tmp_path / "wk03")
    with gzip.open(folder / "bpe_simple_vocab_16e6.txt.gz", "wt", encoding="utf-8") as f:
        f.write("#version\n")
    image = planted_image((60, 90))  # blobs placed for the toy detector's query grid
    _viewer, _image, w = make_widget(image)
    w.load_bundle(folder)
    assert "Boxes only" in w.model.info.text() and w.session.texts is not None
    lay, blob = w.session.layers, BLOBS[1]
    lay.shapes.add(np.array([[blob.r0 - 1, blob.c0 - 1], [blob.r0 - 1, blob.c1],
                             [blob.r1, blob.c1], [blob.r1, blob.c0 - 1]], float),
                   shape_type="rectangle")
    settle(qtbot, w.session)
    preview = lay.preview.data > 0
    assert preview[blob.r0:blob.r1, blob.c0:blob.c1].mean() > 0.8
    preview[max(blob.r0 - 3, 0):blob.r1 + 3, blob.c0 - 3:blob.c1 + 3] = False
    assert not preview.any()
    lay.points.add([(blob.r0 + blob.r1) / 2, (blob.c0 + blob.c1) / 2])
    settle(qtbot, w.session)
    assert "no click decoder" in w.session.messages[-1]


def test_download_menu_lists_the_registry_and_the_toy_model(make_napari_viewer, open_widget,
                                                            qtbot):
    from napari_sam3_onnx.models.registry import KNOWN_BUNDLES

    viewer = make_napari_viewer()
    w = open_widget(viewer)
    actions = [a for a in w.model.download.menu().actions() if not a.isSeparator()]
    assert actions[0].text().startswith("Toy model")
    assert [a.text() for a in actions] == [s.title for s in KNOWN_BUNDLES]
    actions[0].trigger()
    assert w.session.encoder is not None and "TOY TEST MODEL" in w.model.info.text()
    assert w.model.folder.text() == "Toy model (not SAM 3)"
    assert w.model.folder.toolTip() == str(w.model.bundle_folder.resolve())
    w.model.folder.setText(str(w.model.folder.text()) + "-missing")
    w.model.load()
    assert w.session.encoder is None and "Not loaded" in w.model.info.text()
