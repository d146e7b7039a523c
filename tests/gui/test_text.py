"""The Text tab in a real viewer, on concept test bundles with the toy tokenizer.

Toy semantics (napari_sam3_onnx.testing.concepts): "bright" finds blobs brighter than 0.7 (the
two 235 blobs of testing.scenes, not the 150 one), "thing" (and any unknown word) everything
brighter than 0.25, "nothing" nothing. Scores grow with how much of its query cell a blob fills.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from napari_sam3_onnx._napari.layers import same
from napari_sam3_onnx.testing.scenes import BLOBS, SPECK, planted_image
from napari_sam3_onnx.testing.tokenizer import build_text_bundle, write_toy_tokenizer

pytestmark = pytest.mark.gui

TOP_LEFT, RIGHT, MID = BLOBS[:3]
#: An asymmetric stack: every slice plants other blobs (and z=2 nothing bright).
PLANTED = ((TOP_LEFT, MID), (RIGHT, MID, TOP_LEFT), (MID,))


def stack(planted=PLANTED):
    """``(len(planted), 60, 90)`` uint8: channel 0 of testing.scenes' planted images."""
    return np.stack([planted_image((60, 90), blobs)[..., 0] for blobs in planted])


def centre(blob):
    return (blob.r0 + blob.r1) // 2, (blob.c0 + blob.c1) // 2


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("text_bundles")
    return {layout: build_text_bundle(root / layout, layout)
            for layout in ("wkentaro-v0.3", "samexporter")}


@pytest.fixture
def make_text(make_napari_viewer, open_widget, bundles, qtbot):
    """``make_text(data, layout, **image_kwargs) -> (viewer, image, widget, text_panel)``."""

    def factory(data, layout="samexporter", **kwargs):
        viewer = make_napari_viewer()
        kwargs.setdefault("contrast_limits", (0, 255))
        image = viewer.add_image(data, **kwargs)
        widget = open_widget(viewer)
        widget.load_bundle(bundles[layout], toy=True)
        panel = widget.panels["Text"]
        widget.tabs.setCurrentWidget(panel)
        panel.link.setChecked(False)  # ids per slice here; linking: test_toy_tabs.py
        return viewer, image, widget, panel

    return factory


def run(qtbot, panel, text, scope="current", timeout=20000, **scope_kwargs):
    panel.concepts.setText(text)
    panel.scope.set_mode(scope, **scope_kwargs)
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=timeout)
    return panel.viewer.layers[-1]


def check_table(layer):
    """Each features row describes exactly the pixels of its label."""
    table = layer.features
    ids = sorted(int(i) for i in np.unique(layer.data) if i)
    assert sorted(table["index"].tolist()) == ids
    for row in table.itertuples():
        z = int(row.index_0)
        assert int((layer.data[z] == row.index).sum()) == row.area_px
        assert not (layer.data[np.arange(len(layer.data)) != z] == row.index).any()


@pytest.mark.parametrize("layout", ["wkentaro-v0.3", "samexporter"])
def test_bright_finds_the_planted_instances_on_their_slices(make_text, qtbot, layout):
    _viewer, image, _w, panel = make_text(stack(), layout, scale=(2.0, 0.5, 0.25),
                                          translate=(1.0, 10.0, -5.0))
    out = run(qtbot, panel, "bright", "all")
    assert out.name == "SAM text: bright"
    np.testing.assert_allclose(out.scale, image.scale)
    np.testing.assert_allclose(out.translate, image.translate)
    data = out.data
    assert data.shape == (3, 60, 90)
    # z=0: only the top-left blob; z=1: both bright blobs; z=2: nothing bright
    assert data[0][centre(TOP_LEFT)] == 1 and set(np.unique(data[0])) == {0, 1}
    z1 = {data[1][centre(RIGHT)], data[1][centre(TOP_LEFT)]}
    assert z1 == {2, 3} and set(np.unique(data[1])) == {0, 2, 3}
    assert not data[2].any() and not any(data[z][centre(MID)] for z in range(3))
    table = out.features.set_index("index")
    assert list(table["concept"]) == ["bright"] * 3
    assert list(table["index_0"]) == [0, 1, 1]
    assert table.loc[2, "score"] >= table.loc[3, "score"] > 0.5  # ids follow the score
    check_table(out)
    assert "3 instance(s) of bright on 2 slice(s) (3 searched)" in panel.messages[-1]
    # hovering an instance shows its concept and score
    status = out.get_status(out.data_to_world((0, *centre(TOP_LEFT))), world=True)
    assert "concept: bright" in str(status) and "score:" in str(status)


def test_floor_on_raw_heads_keeps_or_drops_the_speck(make_text, qtbot):
    _viewer, _image, _w, panel = make_text(planted_image((60, 90))[..., 0], "samexporter")
    panel.floor.set_value(0.1)
    low = run(qtbot, panel, "thing")
    assert low.data[SPECK.r0:SPECK.r1, SPECK.c0:SPECK.c1].any()
    assert 0.1 < low.features["score"].min() < 0.5
    assert panel.floor.slider.minimum() == 0 and "raw" in panel.floor.note.text().lower()
    panel.floor.set_value(0.5)
    panel.target.setCurrentIndex(panel.target.findText("a new layer per run"))
    high = run(qtbot, panel, "thing")
    assert not same(high, low) and not high.data[SPECK.r0:SPECK.r1, SPECK.c0:SPECK.c1].any()
    assert len(high.features) == 3 and high.features["score"].min() > 0.5


def test_floor_cannot_go_below_the_cut_baked_into_wkentaro(make_text, qtbot):
    _viewer, _image, _w, panel = make_text(planted_image((60, 90))[..., 0], "wkentaro-v0.3")
    panel.floor.set_value(0.1)
    out = run(qtbot, panel, "thing")
    assert not out.data[SPECK.r0:SPECK.r1, SPECK.c0:SPECK.c1].any()
    assert panel.floor.slider.minimum() == 50 and panel.floor.value == 0.5
    panel.floor.set_value(0.2)
    assert panel.floor.value == 0.5
    assert "this export cuts at 0.5 inside the graph" in panel.floor.note.text().lower()


def test_language_encoder_runs_once_for_a_ten_slice_run(make_text, qtbot):
    planted = [(TOP_LEFT,), (RIGHT,)] * 5
    _viewer, _image, w, panel = make_text(stack(planted), "samexporter")
    adapter = w.model.adapter
    calls = []
    detector = adapter.concept_detector
    original = detector.encode_text
    detector.encode_text = lambda ids, *a: calls.append(list(ids)) or original(ids, *a)
    out = run(qtbot, panel, "bright", "all")
    assert len(calls) == 1 and w.session.encoder.encoder_calls == 10
    assert out.features["index"].tolist() == list(range(1, 11))
    again = run(qtbot, panel, "bright", "range", lo=2, hi=5)  # cached planes, cached phrase
    assert len(calls) == 1 and w.session.encoder.encoder_calls == 10
    assert sorted(again.features["index_0"]) == [2, 3, 4, 5]


def test_cancel_mid_stack_keeps_the_finished_slices(make_text, qtbot):
    viewer, _image, w, panel = make_text(stack([(TOP_LEFT, RIGHT)] * 8), "samexporter")
    adapter = w.model.adapter
    reached, release = threading.Event(), threading.Event()
    original, count = adapter.encode, []

    def slow_encode(rgb):
        count.append(1)
        if len(count) == 4:
            reached.set()
            release.wait(10)
        return original(rgb)

    adapter.encode = slow_encode
    panel.concepts.setText("bright")
    panel.scope.set_mode("all")
    panel.run()
    assert panel.running and not panel.run_button.isEnabled()
    out = viewer.layers[-1]
    qtbot.waitUntil(reached.is_set, timeout=10000)
    panel.cancel()
    release.set()
    qtbot.waitUntil(lambda: not panel.running, timeout=10000)
    assert len(count) == 4  # the slice in progress finished; no further slice started
    assert all(out.data[z].max() > 0 for z in range(4)) and not out.data[4:].any()
    assert out.features["index"].tolist() == list(range(1, 9))
    check_table(out)
    assert "Cancelled after 4 of 8" in panel.messages[-1] and panel.run_button.isEnabled()


def test_empty_and_over_long_prompts(make_text, qtbot):
    viewer, _image, _w, panel = make_text(planted_image((60, 90))[..., 0])
    n = len(viewer.layers)
    for text in ("", "   ", " , ,"):
        panel.concepts.setText(text)
        panel.run()
        assert "Type at least one concept" in panel.messages[-1]
        assert not panel.running and len(viewer.layers) == n
    out = run(qtbot, panel, "bright " * 40)
    assert any("SAM 3 reads 32" in m for m in panel.messages)
    assert out.name.startswith("SAM text: bright bright")  # the run went on, cut to 32 tokens


@pytest.mark.parametrize("positive", [True, False])
def test_exemplar_boxes_reach_the_detector(make_text, qtbot, positive):
    _viewer, _image, w, panel = make_text(planted_image((60, 90))[..., 0], "samexporter")
    adapter = w.model.adapter
    seen = []
    detector = adapter.concept_detector
    original = detector.detect
    detector.detect = lambda emb, text, boxes=None, labels=None: (
        seen.append((text, boxes, labels)) or original(emb, text, boxes, labels))
    panel.use_boxes.setChecked(True)
    (panel.positive if positive else panel.negative).setChecked(True)
    shapes = w.session.layers.shapes
    shapes.add(np.array([[MID.r0, MID.c0], [MID.r0, MID.c1], [MID.r1, MID.c1],
                         [MID.r1, MID.c0]], float), shape_type="rectangle")
    assert list(shapes.features["exemplar_positive"]) == [positive]
    out = run(qtbot, panel, "thing")
    # (the Clicks tab also sends the box, as a "visual" exemplar, for its preview)
    (boxes, labels), = [(b, la) for t, b, la in seen if t is panel.texts.get("thing")]
    np.testing.assert_allclose(boxes[0], MID.box_cxcywh((60, 90), shrink=1.0), atol=0.02)
    assert labels.tolist() == [int(positive)]
    found = {b.name for b in (TOP_LEFT, RIGHT, MID) if out.data[centre(b)]}
    # a positive exemplar of the mid-grey blob keeps only blobs like it; a negative one drops it
    assert found == ({"mid_centre"} if positive else {"bright_top_left", "bright_right"})


def test_run_into_an_existing_layer_is_one_undo_step(make_text, qtbot):
    viewer, _image, _w, panel = make_text(stack(), "samexporter")
    user = np.zeros((3, 60, 90), np.int32)
    user[1, TOP_LEFT.r0:TOP_LEFT.r1, TOP_LEFT.c0:TOP_LEFT.c0 + 5] = 7  # the user's own object
    mine = viewer.add_labels(user.copy(), name="my cells")
    before = mine.data.copy()
    panel._refresh_targets()
    panel.target.setCurrentIndex(panel.target.findText("my cells"))
    n = len(viewer.layers)
    run(qtbot, panel, "bright", "all")
    assert len(viewer.layers) == n  # no new layer
    data = mine.data
    assert (data[before == 7] == 7).all()  # the user's pixels are kept
    assert data[0][centre(TOP_LEFT)] == 8 and {data[1][centre(RIGHT)],
                                               data[1][centre(TOP_LEFT)]} == {9, 10}
    rows = mine.features
    assert rows["index"].tolist() == [8, 9, 10]
    assert int(rows.set_index("index").loc[data[1][centre(TOP_LEFT)], "area_px"]) == int(
        (data[1] == data[1][centre(TOP_LEFT)]).sum())
    mine.undo()
    np.testing.assert_array_equal(mine.data, before)


def test_four_d_runs_along_the_chosen_axis(make_text, qtbot):
    data = np.stack([stack(), stack(PLANTED[::-1])])  # (t=2, z=3, rows, cols)
    viewer, _image, _w, panel = make_text(data, "samexporter")
    viewer.dims.set_current_step(0, 1)
    viewer.dims.set_current_step(1, 0)
    panel.scope.set_mode("all")
    panel.scope.axis.setCurrentIndex(1)  # along z, at t=1
    out = run(qtbot, panel, "bright", "all")
    assert not out.data[0].any()
    assert out.data[1, 0][centre(TOP_LEFT)] == 0 and out.data[1, 2][centre(TOP_LEFT)] > 0
    table = out.features
    assert set(zip(table["index_0"], table["index_1"], strict=True)) == {(1, 1), (1, 2)}


def test_bundles_without_text_explain_and_text_only_bundles_load(make_text, qtbot, hf_bundle,
                                                                  tmp_path):
    from napari_sam3_onnx.testing.comicapp import build_comicapp

    _viewer, _image, w, panel = make_text(planted_image((60, 90))[..., 0])
    assert panel.run_button.isEnabled() and panel.explain.isHidden()
    w.load_bundle(hf_bundle)
    assert not panel.run_button.isEnabled() and not panel.concepts.isEnabled()
    assert "cannot search by text" in panel.explain.text() and not panel.explain.isHidden()
    panel.run()
    assert "cannot search by text" in panel.messages[-1]
    folder = build_comicapp(tmp_path / "comic", box_graph=False)  # text, no boxes
    write_toy_tokenizer(folder)
    w.load_bundle(folder)
    assert w.model.adapter is not None and "Text only" in w.model.info.text()
    assert panel.run_button.isEnabled() and not panel.use_boxes.isEnabled()
    out = run(qtbot, panel, "bright")
    assert {b.name for b in BLOBS[:3] if out.data[centre(b)]} == {"bright_top_left",
                                                                   "bright_right"}


def test_a_cancelled_run_counts_the_slices_its_instances_are_on(make_text, qtbot):
    planted = [(TOP_LEFT, RIGHT), (MID,), (RIGHT,), (MID,), (TOP_LEFT,), (MID,)]
    viewer, _image, w, panel = make_text(stack(planted), "samexporter")
    adapter = w.model.adapter
    reached, release = threading.Event(), threading.Event()
    original, count = adapter.encode, []

    def slow_encode(rgb):
        count.append(1)
        if len(count) == 4:
            reached.set()
            release.wait(10)
        return original(rgb)

    adapter.encode = slow_encode
    panel.concepts.setText("bright")
    panel.scope.set_mode("all")
    panel.run()
    qtbot.waitUntil(reached.is_set, timeout=10000)
    panel.cancel()
    release.set()
    qtbot.waitUntil(lambda: not panel.running, timeout=10000)
    out = viewer.layers[-1]
    on = sorted({int(z) for z in np.nonzero(out.data.reshape(len(planted), -1).any(1))[0]})
    assert on == [0, 2]  # z=1 and z=3 hold only the dim blob
    assert ("Cancelled after 4 of 6 slice(s)" in panel.messages[-1]
            and "3 instance(s) of bright on 2 slice(s) (4 searched)" in panel.messages[-1])


def test_a_wwww_folder_searches_text_in_the_dock(make_text, qtbot, tmp_path):
    """wW-Ww's detector and text graphs were ignored (clicks only); now the Text tab runs."""
    from napari_sam3_onnx.testing.hf_sam3 import build_wwww

    _viewer, _image, w, panel = make_text(planted_image((60, 90))[..., 0])
    folder = build_wwww(tmp_path / "wwww")
    write_toy_tokenizer(folder)
    w.load_bundle(folder)
    assert w.model.adapter.layout == "hf-sam3"
    assert "clicks, boxes, text" in w.model.info.text()
    assert panel.run_button.isEnabled()
    out = run(qtbot, panel, "bright")
    assert {b.name for b in BLOBS[:3] if out.data[centre(b)]} == {"bright_top_left",
                                                                   "bright_right"}
