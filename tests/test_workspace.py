"""The workspace and the search workflow over it, without napari (the dock's and the API's loop)."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.api.io import InputError
from napari_sam3_onnx.api.jobs import StackJob
from napari_sam3_onnx.api.search import iter_search
from napari_sam3_onnx.api.workspace import DataVersions, Workspace
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import MissingCapabilityError, Sam3OnnxError
from napari_sam3_onnx.testing.scenes import BLOBS, planted_image
from napari_sam3_onnx.testing.tokenizer import build_text_bundle

TOP_LEFT, RIGHT, MID = BLOBS[:3]
PLANTED = ((TOP_LEFT, MID), (RIGHT, MID, TOP_LEFT), (MID,), (RIGHT,))


def stack():
    return np.stack([planted_image((60, 90), blobs)[..., 0] for blobs in PLANTED])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_text_bundle(tmp_path_factory.mktemp("ws") / "wk", "wkentaro-v0.3")


def refs_of(data):
    job = StackJob(data, "image", 0, False, (0, 255), None)
    view = job.view()
    return [job.ref(view, i) for i in job.indices(view)]


def test_one_language_cache_per_model_read_with_the_graphs_context_length(folder, monkeypatch):
    adapter = open_adapter(folder)
    monkeypatch.setattr(type(adapter.concept_detector), "context_length",
                        property(lambda self: 9))
    ws = Workspace()
    with pytest.raises(Sam3OnnxError, match="Load a model"):
        _ = ws.texts
    ws.attach(adapter, folder)
    texts = ws.texts
    assert ws.texts is texts and texts.tokenizer.context_length == 9
    ws.attach(adapter, folder)  # the same model again (another store): the same cache
    assert ws.texts is texts
    ws.attach(open_adapter(folder), folder)  # another model: its own cache
    assert ws.texts is not texts
    ws.detach()
    assert ws.adapter is None and ws.encoder is None and not ws.has(Capability.TEXT)


def test_prepare_touches_nothing_and_use_attaches_what_it_made(folder, tmp_path):
    """The dock prepares a store-backed encoder in a worker and attaches it on its thread."""
    adapter = open_adapter(folder)
    ws = Workspace()
    ws.attach(adapter, folder)
    texts, memory = ws.texts, ws.encoder
    ready = ws.prepare(adapter, folder, tmp_path / "emb.zarr", write=True)
    assert ws.encoder is memory and ws.store is None  # nothing attached yet
    assert (tmp_path / "emb.zarr" / "zarr.json").is_file()  # the store was opened (created)
    assert ready.encoder is not memory and ready.encoder.cache is ws.cache
    ws.pause()  # while it was being checked: the model stays, nothing can encode
    assert ws.encoder is None and ws.adapter is adapter and ws.texts is texts
    assert ws.use(ready) is ready.encoder and ws.encoder is ready.encoder
    assert ws.store == tmp_path / "emb.zarr" and ws.texts is texts  # same model: same cache
    with pytest.raises(Sam3OnnxError, match="No embedding store at"):
        ws.prepare(adapter, folder, tmp_path / "missing.zarr")
    assert ws.encoder is ready.encoder  # a refused store changes nothing


def test_detach_keeps_the_cache_and_the_data_versions(folder):
    ws = Workspace()
    ws.attach(open_adapter(folder), folder)
    cache, ref = ws.cache, refs_of(stack())[0]
    ws.encoder.embed(ref)
    ws.versions.bump("layer")
    ws.detach()
    assert ws.cache is cache and len(cache) == 1 and ws.versions.get("layer") == 1
    encoder = ws.attach(open_adapter(folder), folder)
    assert encoder.cache is cache


def test_data_versions_count_per_image():
    versions = DataVersions()
    assert versions.get("a") == 0 and versions.bump("a") == 1 and versions.bump("a") == 2
    assert versions.get("b") == 0


def test_the_api_search_is_the_workspace_generator(folder):
    """``api.search_text`` (the CLI's path) and the dock's loop give the same planes and ids."""
    data = stack()
    bundle = api.open_bundle(folder)
    headless = api.search_text(bundle, data, "bright", window=(0, 255), link_iou=None)
    ws = Workspace()
    ws.attach(open_adapter(folder), folder)
    steps = list(iter_search(ws, refs_of(data), ["bright"]))
    assert [s.index for s in steps] == [(0,), (1,), (2,), (3,)]
    assert [(s.done, s.total) for s in steps] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    np.testing.assert_array_equal(np.stack([s.result.labels for s in steps]), headless.labels)
    ids = [i.id for s in steps for i in s.result.instances]
    assert ids == list(range(1, len(ids) + 1)) == [row["label"] for row in headless.rows]
    assert len(ids) == 4  # top-left; right and top-left; none; right


def test_search_tiles_with_the_workspace_setting_and_stops_on_the_cancel_token(folder):
    data = stack()
    ws = Workspace(tiling=TileSettings(size=56, overlap=28, threshold=80))
    ws.attach(open_adapter(folder), folder)
    seen = []
    ws.encoder.listen(on_start=lambda ref: seen.append(ref.region))
    done = []
    for step in iter_search(ws, refs_of(data), ["bright"],
                            cancelled=lambda: len(done) == 2):
        done.append(step)
    assert [s.index for s in done] == [(0,), (1,)]
    assert len(seen) == 2 * 6 and None not in seen  # tiles only, of the planes searched


def test_search_refuses_bad_options_and_a_model_without_text(folder, tmp_path):
    ws = Workspace()
    ws.attach(open_adapter(folder), folder)
    with pytest.raises(InputError, match="floor"):
        next(iter_search(ws, refs_of(stack()), ["bright"], floor=1.5))
    with pytest.raises(InputError, match="min_area"):
        next(iter_search(ws, refs_of(stack()), ["bright"], min_area=-1))
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    clicks = build_hf_tracker(tmp_path / "clicks")
    ws.attach(open_adapter(clicks), clicks)
    with pytest.raises(MissingCapabilityError):
        next(iter_search(ws, refs_of(stack()), ["bright"]))


def test_box_texts_only_for_a_detector_without_a_sam_head(folder, tmp_path):
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    ws = Workspace()
    assert ws.box_texts() is None  # no model
    ws.attach(open_adapter(folder), folder)  # text and boxes through the detector, no clicks
    assert ws.box_texts() is ws.texts
    clicks = build_hf_tracker(tmp_path / "clicks")
    ws.attach(open_adapter(clicks), clicks)  # a SAM head: boxes go to its prompt decoder
    assert ws.box_texts() is None
