"""A stack precomputed with the CLI is prompted, searched and propagated with no encoding.

The store comes from ``python -m napari_sam3_onnx.cli precompute`` in another process; the
stack is opened in napari from the same file and the dock is opened the napari way. Also: the
model section refuses a store of another bundle with the store's own message, and every tab
shares one encoder and one cache (a tiled plane's tiles are encoded once for clicks and text).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.engine.encoding import SliceEncoder
from napari_sam3_onnx.engine.store.embedding_store import BundleTag, EmbeddingStore
from napari_sam3_onnx.engine.store.lookup import LookupStoreEncoder
from napari_sam3_onnx.engine.store.precompute import StoreBackedEncoder, precompute
from napari_sam3_onnx.engine.tiling.tiled import input_side, tile_refs
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

from .gui_helpers import settle

pytestmark = pytest.mark.gui

#: The contrast window the stack is precomputed with and displayed through.
WINDOW = (550.0, 2600.0)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return resolve_bundle("toy", tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def precomputed(tmp_path_factory, toy):
    """``(stack.tif, emb.zarr, stack, truth)`` filled by the CLI in a subprocess."""
    import tifffile

    where = tmp_path_factory.mktemp("cli")
    stack, truth = synthetic_nuclei((5, 180, 240))
    tif = where / "stack.tif"
    tifffile.imwrite(tif, stack)
    store = where / "emb.zarr"
    done = subprocess.run(
        [sys.executable, "-m", "napari_sam3_onnx.cli", "precompute", str(toy), str(tif),
         "--store", str(store), "--window", *map(str, WINDOW)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return tif, store, stack, truth


def opened(make_napari_viewer, open_widget, toy, tif):
    viewer = make_napari_viewer()
    (image,) = viewer.open(str(tif))
    w = open_widget(viewer)
    w.model.load(toy, toy=True)
    image.contrast_limits = WINDOW  # the window the stack was precomputed with
    return viewer, image, w


def attach_store(qtbot, w, store, write):
    """Choose ``store`` in the Embeddings row and wait for its check (it runs in a worker)."""
    w.model.store.attach(store, write=write)
    qtbot.waitUntil(lambda: w.model.checking is None, timeout=30000)


def click_and_commit(qtbot, viewer, w, truth, z, which):
    viewer.dims.set_current_step(0, z)
    rr, cc = np.nonzero(truth[z] == which)
    w.session.layers.points.add([z, rr.mean(), cc.mean()])
    settle(qtbot, w.session, timeout=10000)
    assert np.asarray(w.session.layers.preview.data[z])[truth[z] == which].mean() > 0.5
    return w.commit()


def test_cli_precomputed_stack_in_every_tab_with_zero_encodes(
        make_napari_viewer, open_widget, qtbot, toy, precomputed):
    tif, store, stack, truth = precomputed
    viewer, image, w = opened(make_napari_viewer, open_widget, toy, tif)
    assert image.name == "stack" and image.data.shape == stack.shape
    attach_store(qtbot, w, store, write=False)
    encoder = w.session.encoder
    assert isinstance(encoder, LookupStoreEncoder) and w.model.store.path == store
    # the Clicks tab on every slice
    for z in range(stack.shape[0]):
        assert click_and_commit(qtbot, viewer, w, truth, z, 1 if z == 0 else 2 + z % 3)
    # the Text tab on every slice
    text = w.panels["Text"]
    w.tabs.setCurrentWidget(text)
    text.concepts.setText("nucleus")
    text.scope.set_mode("all")
    text.run()
    qtbot.waitUntil(lambda: not text.running, timeout=30000)
    found = viewer.layers[-1].data
    assert all(len(set(np.unique(found[z])) - {0}) >= 3 for z in range(stack.shape[0]))
    # the Propagate tab through every slice, from object 1 (committed on z=0)
    prop = w.panels["Propagate"]
    w.tabs.setCurrentWidget(prop)
    prop.from_ids.setChecked(True)
    prop.ids.setText("1")
    viewer.dims.set_current_step(0, 0)
    assert prop.run()
    qtbot.waitUntil(lambda: not prop.running, timeout=30000)
    assert "5 slice(s) processed (all from the cache)" in prop.status.text()
    target = w.session.layers.target
    assert all((np.asarray(target.data[z]) == 1).any() for z in range(stack.shape[0]))
    # the Automatic tab on every slice
    from napari_sam3_onnx._napari.automatic.output import PREVIEW

    auto = w.panels["Automatic"]
    w.tabs.setCurrentWidget(auto)
    auto.settings.points_per_side.setValue(8)
    auto.scope.set_mode("all")
    auto.run()
    qtbot.waitUntil(lambda: not auto.running, timeout=60000)
    assert np.asarray(viewer.layers[PREVIEW].data).any()
    assert w.session.encoder is encoder  # one encoder served every tab
    assert w.model.workspace is w.session.workspace is text.workspace is prop.workspace
    assert w.session.view.tiling is w.workspace.tiling  # one tiling setting for every tab
    assert encoder.encoder_calls == 0 and encoder.store.writes == 0
    assert encoder.found == stack.shape[0]  # each plane read from disk once, then from memory


def test_a_store_of_another_bundle_is_refused_with_the_stores_message(
        make_napari_viewer, open_widget, qtbot, tmp_path, toy, hf_bundle, precomputed):
    tif, _store, stack, truth = precomputed
    other = open_adapter(hf_bundle)
    theirs = EmbeddingStore(tmp_path / "hf.zarr", BundleTag.for_folder(hf_bundle, other.layout))
    precompute(StoreBackedEncoder(other, theirs), [_ref(stack)])
    viewer, _image, w = opened(make_napari_viewer, open_widget, toy, tif)
    attach_store(qtbot, w, tmp_path / "hf.zarr", write=True)
    assert w.model.store.path is None and w.model.store.choice.currentText() == "Memory only"
    assert not isinstance(w.session.encoder, LookupStoreEncoder)
    assert "Embedding store not used" in w.status.text()
    assert "holds 1 embedding(s) of bundle" in w.status.text()
    assert "--replace-store" in w.status.text()  # the store's own hint
    # the model then works from memory only, and the store is left as it was
    encoder = w.session.encoder
    assert type(encoder) is SliceEncoder and w.workspace.store is None
    assert all(w.panels[t].run_button.isEnabled() for t in ("Text", "Automatic"))
    click_and_commit(qtbot, viewer, w, truth, 1, 2)
    assert encoder.encoder_calls == 1
    assert theirs.entries("x") == ["00000"] and theirs.images() == ["x"]


def _ref(stack):
    from napari_sam3_onnx.engine.encoding import SliceRef

    return SliceRef(stack, (0,), window=WINDOW, source="x")


def test_new_planes_go_into_the_store_only_when_allowed(
        make_napari_viewer, open_widget, qtbot, tmp_path, toy, precomputed):
    tif, _store, _stack, truth = precomputed
    viewer, _image, w = opened(make_napari_viewer, open_widget, toy, tif)
    attach_store(qtbot, w, tmp_path / "missing.zarr", write=False)
    assert w.model.store.path is None and "No embedding store at" in w.status.text()
    attach_store(qtbot, w, tmp_path / "new.zarr", write=True)
    click_and_commit(qtbot, viewer, w, truth, 2, 1)
    encoder = w.session.encoder
    assert encoder.encoder_calls == 1 and encoder.store.writes == 1
    assert encoder.store.entries("stack") == ["00002"]  # named after the layer


@pytest.mark.slow  # > 5 s (a tiled plane's encodes, then a store); docs/contributing.md
def test_text_tab_tiles_on_the_dock_switch_and_reuses_the_clicks_tiles(
        make_napari_viewer, open_widget, qtbot, toy):
    stack, truth = synthetic_nuclei((1, 620, 1300), n_nuclei=14, seed=3)
    plane, truth = stack[0], truth[0]
    viewer = make_napari_viewer()
    viewer.add_image(plane, name="large")
    w = open_widget(viewer)
    w.model.load(toy, toy=True)
    w.tile.setChecked(True)  # the dock's "Tile large planes"
    encoded = []
    encoder = w.session.encoder
    encoder.listen(on_start=lambda ref: encoded.append(ref.region))
    rr, cc = np.nonzero(truth == 1)
    w.session.layers.points.add([rr.mean(), cc.mean()])
    settle(qtbot, w.session, timeout=10000)
    assert len(encoded) == 1 and encoded[0] is not None  # one tile for the click
    text = w.panels["Text"]
    text.concepts.setText("nucleus")
    text.run()
    qtbot.waitUntil(lambda: not text.running, timeout=60000)
    grid = tile_refs(_plane_ref(plane), TileSettings(), input_side(w.model.adapter))
    assert len(grid) > 1
    assert None not in encoded  # never the squeezed whole plane
    # every tile once: the click's tile came from the cache
    assert sorted(encoded) == sorted(r.region for r in grid)
    assert encoder.encoder_calls == len(grid)
    found = viewer.layers[-1].data
    assert len(set(np.unique(found)) - {0}) >= 10


def _plane_ref(plane):
    from napari_sam3_onnx.engine.encoding import SliceRef

    return SliceRef(plane, (), window=(float(plane.min()), float(plane.max())))
