"""Pagarcia tracker bundle and jax-image-tools video: the memory encoder and attention."""

import numpy as np
import pytest

from _tracker_helpers import (
    BLOBS,
    BUILDERS,
    SHAPE,
    best_mask,
    disc_logits,
    iou,
    level0,
    per_channel,
    rgb,
    spy_feeds,
    top_feature,
    xy,
)
from conftest import blob_image, disc
from napari_sam3_onnx.models.adapters import JaxVideoAdapter
from napari_sam3_onnx.models.adapters._memory import CONDITIONED
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.imageops import resize_bilinear
from napari_sam3_onnx.testing import memory as sem
from napari_sam3_onnx.testing.pagarcia import build_pagarcia


@pytest.fixture(scope="module", params=list(BUILDERS))
def adapter(request, tmp_path_factory):
    return open_adapter(BUILDERS[request.param](tmp_path_factory.mktemp(request.param)))


# ---- memory path ---------------------------------------------------------------------------
def _expected_memory(a, emb, logits, from_points):
    m = resize_bilinear(logits, a.input_size, antialias=False)
    m = (m > 0).astype(np.float64) if from_points else 1 / (1 + np.exp(-m.astype(np.float64)))
    centres = np.arange(a.input_size[0]) + 0.5
    top = top_feature(emb)[0]
    g = top.shape[-1]
    k = a.input_size[0] // g
    cover = m.reshape(g, k, g, k).mean(axis=(1, 3))
    bright = (cover * (top[0] + top[1])).sum() / cover.sum()
    return bright, (m.sum(0) * centres).sum() / m.sum(), (m.sum(1) * centres).sum() / m.sum()


@pytest.mark.parametrize("from_points", [True, False])
def test_memory_encode_documented_values(adapter, from_points):
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    logits = disc_logits(adapter, 70.0, 40.0, 15.0, inside=1.5)
    frame = adapter.memory_graphs.memory_encode(emb, logits, 2.0, from_points)
    got = per_channel(frame)
    np.testing.assert_allclose(got[:3], _expected_memory(adapter, emb, logits, from_points),
                               rtol=1e-4)
    assert got[3] == 1.0
    if from_points:  # the binarised disc's centroid, in model (x, y): no transposed mask
        assert abs(got[1] - 70) < 1.5 and abs(got[2] - 40) < 1.5
    pos = frame.pos_enc if frame.pos_enc.ndim == 3 else frame.pos_enc.T.reshape(
        -1, *top_feature(emb).shape[-2:])
    g = pos.shape[-1]
    np.testing.assert_allclose(pos[0, 0], (np.arange(g) + 0.5) * adapter.input_size[1] / g)
    empty = adapter.memory_graphs.memory_encode(emb, np.full(adapter.mask_size, -20, np.float32),
                                                -1.0, True)
    assert per_channel(empty)[3] == -1.0


def test_memory_attend_documented_values(adapter):
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    rows = adapter.memory_graphs.memory_settings.num_maskmem
    cond = adapter.memory_graphs.memory_encode(emb, disc_logits(adapter, 30, 30, 10), 1.0, True)
    prev = adapter.memory_graphs.memory_encode(emb, disc_logits(adapter, 80, 60, 12), 1.0, False)
    gone = adapter.memory_graphs.memory_encode(emb, np.full(adapter.mask_size, -20, np.float32),
                                               -1.0, False)
    c = top_feature(emb).shape[1]
    ptrs = np.random.default_rng(0).normal(size=(3, c)).astype(np.float32)
    fused = adapter.memory_graphs.memory_attend(emb, [cond, prev], [rows - 1, 0], ptrs, [3, 1, 2])
    f = fused.features[CONDITIONED][0]
    raw = top_feature(emb)[0]
    np.testing.assert_allclose(f[:2], raw[:2], atol=1e-6)  # raw feature, no no_mem_embed
    want = per_channel(prev)
    np.testing.assert_allclose(f[2:6].mean(axis=(1, 2)), [want[1], want[2], 1.0, want[0]],
                               rtol=1e-5)
    g = f.shape[-1]
    np.testing.assert_allclose(f[6, 0], (np.arange(g) + 0.5) * adapter.input_size[1] / g)
    np.testing.assert_allclose(f[7].mean(), ptrs[:, ::sem.MEM_CHANNELS].sum(), rtol=1e-5)
    back = adapter.memory_graphs.memory_attend(emb, [cond, gone], [rows - 1, 0], ptrs[:0], [])
    b = back.features[CONDITIONED][0].mean(axis=(1, 2))
    np.testing.assert_allclose(b[[2, 3, 7]], [per_channel(cond)[1], per_channel(cond)[2], 0.0],
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="rows"):
        adapter.memory_graphs.memory_attend(emb, [cond], [rows], ptrs, [1, 2, 3])


def test_pagarcia_static_memory_slots(tmp_path):
    a = open_adapter(build_pagarcia(tmp_path))
    emb = a.encode(rgb(blob_image(SHAPE, BLOBS)))
    m = a.memory_graphs.memory_encode(emb, disc_logits(a, 30, 30, 10), 1.0, True)
    with pytest.raises(ValueError, match="at most 2 memories"):
        a.memory_graphs.memory_attend(emb, [m, m, m], [6, 1, 0], np.zeros((0, 8), np.float32), [])
    dyn = open_adapter(build_pagarcia(tmp_path / "dyn", max_mem_frames=None, max_obj_ptrs=None))
    assert dyn.memory_graphs.memory_settings.max_memories is None
    f = dyn.memory_graphs.memory_attend(emb, [m, m, m], [6, 1, 0], np.zeros((0, 8), np.float32), [])
    assert f.features[CONDITIONED][0, 4].mean() == 1.0


def test_one_tracking_step_follows_a_drifting_blob(adapter, monkeypatch):
    frame0 = blob_image(SHAPE, BLOBS)
    emb0 = adapter.encode(rgb(frame0))
    r, c, rad = BLOBS[0]
    cands = adapter.prompt_decoder.predict_masks(emb0, xy(adapter, [[r, c]]), [1])
    k = int(np.argmax(cands.iou))
    memory = adapter.memory_graphs.memory_encode(emb0, cands.logits[k], cands.object_score, True)
    moved = (r + 3, c + 4, rad)
    emb1 = adapter.encode(rgb(blob_image(SHAPE, (moved, BLOBS[1]))))
    graphs = adapter.memory_graphs
    fused = graphs.memory_attend(emb1, [memory], [graphs.memory_settings.num_maskmem - 1],
                                 cands.extras["object_pointer"][None], [1.0])
    seen = spy_feeds(adapter, monkeypatch)
    tracked = adapter.prompt_decoder.predict_masks(fused, np.zeros((0, 2), np.float32),
                                                   np.zeros(0, np.int64))
    labels = next(v for k, v in seen[0].items() if k.endswith("labels")).reshape(-1)
    # SAM's empty prompt: pagarcia's graphs pad themselves (N = 0, as its runtime sends);
    # the jax consumers send one (0, 0) point labelled -1, plus the padding point when the
    # graph does not append it (the toy jax decoder does not)
    assert labels.tolist() == ([-1, -1] if isinstance(adapter, JaxVideoAdapter) else [])
    mask = best_mask(tracked)
    assert tracked.object_score > 0 and iou(mask, disc(SHAPE, *moved)) > 0.7
    assert not (mask & disc(SHAPE, BLOBS[1][0], BLOBS[1][1], BLOBS[1][2] + 1)).any()
    lm = adapter.mask_size[0]
    i, j = int((moved[0] + 0.5) * lm / SHAPE[0]), int((moved[1] + 0.5) * lm / SHAPE[1])
    bright = level0(emb1)[0, 0, i, j]  # conditioned slice: no no_mem_embed in the decoder
    assert tracked.logits[int(np.argmax(tracked.iou)), i, j] == pytest.approx(
        sem.GAIN * (bright - sem.BRIGHT), abs=1e-4)


# ---- the real SAM 3 geometry ---------------------------------------------------------------
def test_pagarcia_full_geometry_click_and_memory(tmp_path):
    a = open_adapter(build_pagarcia(tmp_path, sem.MEMORY_FULL))
    assert a.input_size == (1008, 1008) and a.mask_size == (288, 288)
    shape, blobs = (300, 420), ((80, 100, 25), (210, 330, 30))
    emb = a.encode(rgb(blob_image(shape, blobs)))
    assert emb.features["image_embeddings.2"].shape == (1, 8, 72, 72)
    cands = a.prompt_decoder.predict_masks(emb, xy(a, [[210, 330]], shape), [1])
    mask = best_mask(cands, shape)
    assert iou(mask, disc(shape, 210, 330, 30)) > 0.9
    assert not (mask & disc(shape, 80, 100, 27)).any()
    frame = a.memory_graphs.memory_encode(emb, cands.logits[int(np.argmax(cands.iou))], 1.0, True)
    x, y = per_channel(frame)[1:3]  # centroid in model pixels
    assert abs(x - 330.5 * 1008 / 420) < 6 and abs(y - 210.5 * 1008 / 300) < 6
