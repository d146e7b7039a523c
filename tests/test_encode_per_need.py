"""One ViT pass per need: Autognosi encodes only the encoder a workflow uses, completes later."""

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.autognosi import build_autognosi
from napari_sam3_onnx.testing.nso import build_nso

SHAPE = (70, 110)
BLOBS = ((20, 30, 8), (45, 80, 9))


def _rgb():
    return np.repeat(blob_image(SHAPE, BLOBS)[..., None], 3, axis=2)


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """An Autognosi toy adapter whose image-encoder runs are counted by role."""
    a = open_adapter(build_autognosi(tmp_path))
    runs = {"vision_encoder": 0, "tracker_encoder": 0}
    for role in runs:
        s = a.sessions[role]
        run = s.run

        def counting(names, feeds, run=run, role=role):
            runs[role] += 1
            return run(names, feeds)

        monkeypatch.setattr(s, "run", counting)
    return a, runs


def test_each_workflow_runs_one_encoder(counted):
    a, runs = counted
    text = a.encode_for(_rgb(), Capability.TEXT)
    assert runs == {"vision_encoder": 1, "tracker_encoder": 0}
    assert set(text.features) == {"fpn_0", "fpn_1", "fpn_2"}
    clicks = a.encode_for(_rgb(), Capability.CLICKS)
    assert runs == {"vision_encoder": 1, "tracker_encoder": 1}
    assert set(clicks.features) == {"image_embeddings_0", "image_embeddings_1",
                                    "image_embeddings_2"}
    a.encode(_rgb())  # the whole embedding: both, as before
    assert runs == {"vision_encoder": 2, "tracker_encoder": 2}


def test_a_partial_embedding_is_completed_and_answers_like_a_whole_one(counted):
    a, runs = counted
    rgb = _rgb()
    part = a.encode_for(rgb, Capability.TEXT)
    assert a.lacks(part, Capability.CLICKS) and not a.lacks(part, Capability.TEXT)
    with pytest.raises(ValueError, match="tracker_encoder"):
        a.prompt_decoder.predict_masks(part, np.array([[30.0, 25.0]], np.float32), np.array([1]))
    whole = a.complete(part, rgb, Capability.CLICKS)
    assert runs == {"vision_encoder": 1, "tracker_encoder": 1}
    assert a.complete(whole, rgb, Capability.TEXT) is whole  # nothing left to run
    full = a.encode(rgb)
    assert set(whole.features) == set(full.features)
    for name in full.features:
        np.testing.assert_array_equal(whole.features[name], full.features[name])


def test_slice_encoder_caches_the_partial_embedding_then_the_completed_one(counted):
    a, runs = counted
    data = np.stack([blob_image(SHAPE, BLOBS)] * 2)
    enc = SliceEncoder(a)
    ref = SliceRef(data, (1,), source="stack")
    first = enc.embed(ref, Capability.TEXT)
    assert runs == {"vision_encoder": 1, "tracker_encoder": 0} and enc.encoder_calls == 1
    assert enc.cached(ref) is first and a.lacks(enc.cached(ref), Capability.CLICKS)
    done = enc.embed(ref, Capability.CLICKS)
    assert runs == {"vision_encoder": 1, "tracker_encoder": 1} and enc.encoder_calls == 2
    assert enc.cached(ref) is done and not a.lacks(done, Capability.TEXT)
    assert enc.cache.nbytes == done.nbytes  # the completed embedding replaced the partial one
    enc.embed(ref, Capability.TEXT)
    enc.embed(ref)
    assert runs == {"vision_encoder": 1, "tracker_encoder": 1}  # all from the cache now


def test_single_encoder_layouts_encode_everything_for_any_need(tmp_path):
    a = open_adapter(build_nso(tmp_path))
    emb = a.encode_for(_rgb(), Capability.TEXT)
    assert set(emb.features) == set(a.encode(_rgb()).features)
    assert not a.lacks(emb, Capability.CLICKS)
