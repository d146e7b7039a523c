"""The README's first command: the sample, the dock opened the napari way and the shipped toy.

Every tab works with the toy at its default settings, and the plugin's three menu entries open
the one dock on their tab.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.widget import SamDock
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

from .gui_helpers import settle


@pytest.fixture
def opened(make_napari_viewer):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "synthetic_nuclei")
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    widget.model.load_toy()
    return viewer, widget


def _widgets(viewer) -> list:
    return [w for w in viewer.window.dock_widgets.values() if isinstance(w, SamDock)]


def test_every_tab_is_enabled_with_the_toy(opened):
    _viewer, w = opened
    assert w.model.adapter is not None and "TOY TEST MODEL" in w.model.info.text()
    assert "clicks, boxes, text, exemplars, propagation" in w.model.info.text()
    assert all(w.tabs.isTabEnabled(i) for i in range(w.tabs.count()))
    text, prop = w.panels["Text"], w.panels["Propagate"]
    assert text.run_button.isEnabled() and text.use_boxes.isEnabled()
    assert not text.explain.isVisible() and text.floor.value == pytest.approx(0.5)
    assert "memory" in prop.method.text().lower()


def test_text_nucleus_at_the_default_floor_finds_the_nuclei_on_the_shown_slice(opened, qtbot):
    viewer, w = opened
    panel = w.panels["Text"]
    z = int(viewer.dims.current_step[0])
    panel.concepts.setText("nucleus")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    out = viewer.layers[-1]
    _, truth = synthetic_nuclei()
    assert len(set(np.unique(out.data[z])) - {0}) == 6
    for n in range(1, 7):
        hit = np.bincount(out.data[z][truth[z] == n]).argmax()
        assert hit > 0 and (out.data[z] == hit).sum() > 0.6 * (truth[z] == n).sum()


def test_a_click_on_a_nucleus_previews_that_nucleus(opened, qtbot):
    viewer, w = opened
    z = int(viewer.dims.current_step[0])
    _, truth = synthetic_nuclei()
    rr, cc = np.nonzero(truth[z] == 2)
    w.session.layers.points.add([z, rr.mean(), cc.mean()])
    settle(qtbot, w.session, timeout=10000)
    preview = np.asarray(w.session.layers.preview.data[z]) > 0
    gt = truth[z] == 2
    assert (preview & gt).sum() / (preview | gt).sum() > 0.7


@pytest.mark.parametrize(("entry", "tab"), [("Text search", "Text"), ("Propagate", "Propagate"),
                                            ("Automatic segmentation", "Automatic")])
def test_each_menu_entry_opens_the_one_dock_on_its_tab(opened, entry, tab):
    viewer, w = opened
    _dock, again = viewer.window.add_plugin_dock_widget(PLUGIN, entry)
    assert again is w and _widgets(viewer) == [w]
    assert w.tabs.tabText(w.tabs.currentIndex()) == tab
    assert w.session.encoder is not None  # moving docks kept the loaded model
    _dock, back = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    assert back is w and w.tabs.currentIndex() == 0


def test_the_dock_opened_from_the_first_entry_is_titled_for_the_whole_dock(make_napari_viewer):
    viewer = make_napari_viewer()
    dock, _w = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    assert dock.name.startswith("SAM 3") and "Clicks" not in dock.name


def test_a_menu_entry_on_a_fresh_viewer_builds_the_widget_on_its_tab(make_napari_viewer):
    viewer = make_napari_viewer()
    _dock, w = viewer.window.add_plugin_dock_widget(PLUGIN, "Propagate")
    assert isinstance(w, SamDock) and w.tabs.tabText(w.tabs.currentIndex()) == "Propagate"


def test_nothing_found_under_a_black_window_says_check_the_contrast_limits(opened, qtbot):
    viewer, w = opened
    image = viewer.layers["synthetic nuclei"]
    z = int(viewer.dims.current_step[0])
    _, truth = synthetic_nuclei()
    rr, cc = np.nonzero(truth[z] == 4)
    image.contrast_limits = (60000.0, 65535.0)  # every nucleus maps to black
    w.session.layers.points.add([z, rr.mean(), cc.mean()])
    settle(qtbot, w.session, timeout=10000)
    assert "finds no object" in w.session.messages[-1]
    assert "check the contrast limits" in w.session.messages[-1]
    panel = w.panels["Text"]
    panel.concepts.setText("nucleus")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    assert "No instance of nucleus" in panel.messages[-1]
    assert "check the contrast limits" in panel.messages[-1]


def test_nothing_found_under_a_fair_window_does_not_blame_the_contrast(opened, qtbot):
    _viewer, w = opened
    panel = w.panels["Text"]
    panel.concepts.setText("nothing")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    assert "No instance of nothing" in panel.messages[-1]
    assert "contrast" not in panel.messages[-1]


def test_the_readme_launcher_opens_the_sample_and_loads_the_toy(qtbot, make_napari_viewer):
    from napari_sam3_onnx._napari.launch import build_parser, open_viewer

    assert build_parser().parse_args(["--test-bundle"]).test_bundle
    viewer, w = open_viewer(test_bundle=True, show=False, viewer=make_napari_viewer())
    try:
        assert viewer.layers[0].name == "synthetic nuclei"
        assert w.model.toy and w.model.folder.text() == "Toy model (not SAM 3)"
        assert w.model.adapter.layout == "nso-sam3"
        assert all(w.tabs.isTabEnabled(i) for i in range(w.tabs.count()))
    finally:
        viewer.close()


def test_automatic_at_its_defaults_finds_one_whole_nucleus_per_nucleus(opened, qtbot):
    from napari_sam3_onnx._napari.automatic.output import PREVIEW
    from napari_sam3_onnx.engine.automatic import AutoMaskSettings

    viewer, w = opened
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    assert panel.settings.settings() == AutoMaskSettings()  # SAM's defaults, untouched
    z = int(viewer.dims.current_step[0])
    panel.run()  # the shown slice
    qtbot.waitUntil(lambda: not panel.running, timeout=120000)
    out = np.asarray(viewer.layers[PREVIEW].data[z])
    _, truth = synthetic_nuclei()
    found = set(np.unique(out)) - {0}
    assert len(found) == 6, panel.messages[-1]
    for n in range(1, 7):
        gt = truth[z] == n
        hit = np.bincount(out[gt]).argmax()
        assert hit > 0 and ((out == hit) & gt).sum() / ((out == hit) | gt).sum() > 0.6
    assert panel.commit_button.isEnabled()


def test_an_empty_automatic_run_says_why_and_commits_no_layer(opened, qtbot):
    viewer, w = opened
    panel = w.panels["Automatic"]
    w.tabs.setCurrentWidget(panel)
    panel.settings.points_per_side.setValue(8)
    panel.settings.stability_score_thresh.setValue(1.0)  # no mask is that stable
    before = len(viewer.layers)
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    said = panel.messages[-1]
    assert "No object found" in said and "stability" in said and "Settings" in said, said
    assert not panel.commit_button.isEnabled()
    panel.commit()
    assert len(viewer.layers) == before + 1  # only the (empty) preview, no result layer
    assert "SAM automatic" not in viewer.layers


def test_text_over_the_stack_links_through_z_and_reruns_reuse_the_layer(opened, qtbot):
    from napari.layers import Labels

    viewer, w = opened
    panel = w.panels["Text"]
    w.tabs.setCurrentWidget(panel)
    assert panel.link.isChecked() and not panel.link.isHidden()  # on by default for a stack
    panel.concepts.setText("nucleus")
    panel.scope.set_mode("all")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    out = viewer.layers[-1]
    _, truth = synthetic_nuclei()
    assert len(set(np.unique(out.data)) - {0}) == 6, panel.messages[-1]  # one id per nucleus
    for n in range(1, 7):
        ids = {np.bincount(out.data[z][truth[z] == n]).argmax() for z in range(1, 12)}
        assert len(ids) == 1 and 0 not in ids, (n, ids)
    count = sum(isinstance(la, Labels) for la in viewer.layers)
    panel.concepts.setText("cell")
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert sum(isinstance(la, Labels) for la in viewer.layers) == count  # the layer is reused
    assert viewer.layers[-1] is out and "cell" in out.name
    assert len(set(np.unique(out.data)) - {0}) == 6
