"""The benchmark-driven fast paths give the same results as the straightforward code they replace.

Each test keeps the previous implementation as a reference: windowed mask upsampling against a
full upsampling, windowed overlap resolution against the (N, rows, cols) argmax, a gray image
resized once against three channels, in-place normalisation against the expression.
"""

import numpy as np
import pytest
from scipy import ndimage

from napari_sam3_onnx.engine.concepts.search import (
    Instance,
    SliceResult,
    binary_masks,
    search_slice,
)
from napari_sam3_onnx.engine.postprocess import logits_to_mask, upsample_crop, upsample_logits
from napari_sam3_onnx.models.adapters._common import encoder_feed
from napari_sam3_onnx.models.base import Detections, SamAdapter, TextEmbedding
from napari_sam3_onnx.models.graph_info import TensorInfo
from napari_sam3_onnx.models.imageops import resize_bilinear, resize_rgb_uint8


def _low(rng, h, w, kind):
    low = rng.normal(-3, 1, (h, w)).astype(np.float32)
    for _ in range(rng.integers(1, 4)):
        r, c, s = rng.integers(0, h), rng.integers(0, w), rng.integers(1, 6)
        low[max(r - s, 0):r + s, max(c - s, 0):c + s] = rng.normal(2, 1)
    if kind == "binary":
        return (low > 0).astype(np.float32)
    if kind == "probabilities":
        return (1 / (1 + np.exp(-low))).astype(np.float32)
    return low


@pytest.mark.parametrize("kind", ["logits", "probabilities", "binary"])
def test_windowed_upsampling_equals_full_upsampling(kind):
    rng = np.random.default_rng(0)
    thr = 0.0 if kind == "logits" else 0.5
    for _ in range(120):
        h, w = (int(x) for x in rng.integers(3, 50, 2))
        shape = tuple(int(x) for x in rng.integers(1, 300, 2))  # shrinking and growing
        low = _low(rng, h, w, kind)
        np.testing.assert_array_equal(logits_to_mask(low, shape, thr),
                                      upsample_logits(low, shape) > thr)
    assert upsample_crop(np.full((8, 8), -1.0), (50, 60)) is None


def test_gray_rgb_resizes_like_three_channels():
    rng = np.random.default_rng(1)
    gray = rng.integers(0, 256, (61, 87), dtype=np.uint8)
    rgb = np.repeat(gray[:, :, None], 3, axis=2)
    for out in ((84, 84), (200, 130), (30, 40)):
        full = np.clip(np.rint(resize_bilinear(rgb, out)), 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(resize_rgb_uint8(rgb, out), full)
    colour = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    full = np.clip(np.rint(resize_bilinear(colour, (40, 50))), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(resize_rgb_uint8(colour, (40, 50)), full)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_in_place_normalisation_gives_the_same_feed(dtype):
    rgb = np.random.default_rng(2).integers(0, 256, (30, 50, 3), dtype=np.uint8)
    info = TensorInfo("pixel_values", dtype, (1, 3, 42, 42))
    feed = encoder_feed(rgb, info, "t", "g")
    chw = resize_rgb_uint8(rgb, (42, 42)).transpose(2, 0, 1)
    want = ((chw.astype(np.float32) / 255.0 - 0.5) / 0.5)[None].astype(dtype)
    assert feed.dtype == np.dtype(dtype) and feed.flags.c_contiguous
    np.testing.assert_array_equal(feed, want)


# ---- search_slice against the previous full-frame implementation -------------------------

def _reference(dets, shape, floor, min_area, fill, first_id=1):
    """search_slice before the windowed rewrite (full-frame masks, argmax ownership)."""
    cand_masks, cand_scores, cand_concepts = [], [], []
    for phrase, det in dets:
        keep = det.scores > floor
        if not keep.any():
            continue
        kept = Detections(det.scores[keep], det.boxes[keep], det.masks[keep], det.mask_kind)
        cand_masks.append(np.stack([upsample_logits(m.astype(np.float32), shape)
                                    > (0.0 if det.mask_kind == "logits" else 0.5)
                                    for m in kept.masks]))
        cand_scores.append(kept.scores)
        cand_concepts += [phrase] * int(keep.sum())
    out = np.zeros(shape, np.int32)
    result = SliceResult(out)
    if not cand_concepts:
        return result
    masks = np.concatenate(cand_masks)
    scores = np.concatenate(cand_scores).astype(np.float64)
    owner = np.where(masks.any(axis=0), np.argmax(masks * (scores[:, None, None] + 1.0), 0), -1)
    next_id = first_id
    for i in np.argsort(-scores, kind="stable"):
        mine = owner == i
        if fill:
            mine = ndimage.binary_fill_holes(mine) & ((owner == i) | (owner == -1))
        area = int(mine.sum())
        if area == 0 or area < min_area:
            continue
        out[mine] = next_id
        rr, cc = np.nonzero(mine)
        result.instances.append(Instance(next_id, cand_concepts[i], float(scores[i]), area, (),
                                         (float(rr.min()), float(cc.min()), float(rr.max()),
                                          float(cc.max()))))
        next_id += 1
    return result


class _Fixed(SamAdapter):
    layout = "fixed"

    def __init__(self, dets):
        self._attach_detector(self, exemplars=False)  # its own detector role (a test double)
        self.dets = dict(dets)

    def detect(self, embedding, text, boxes_cxcywh=None, box_labels=None):
        return self.dets[text.text]


class _Texts:
    def get(self, phrase):
        return TextEmbedding(phrase, {})


def _ring(h, w, r, c, outer, inner):
    rr, cc = np.mgrid[:h, :w]
    d2 = (rr - r) ** 2 + (cc - c) ** 2
    return np.where((d2 <= outer**2) & (d2 > inner**2), 4.0, -4.0).astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
def test_windowed_search_slice_equals_full_frame_reference(seed):
    rng = np.random.default_rng(seed)
    kind = ("logits", "probabilities", "binary")[seed % 3]
    shape = ((97, 143), (40, 30), (256, 200))[seed % 3]
    dets = []
    for phrase in ("a", "b"):
        n = int(rng.integers(0, 9))
        masks = np.stack([_low(rng, 32, 32, kind) for _ in range(n)]) if n else np.zeros(
            (0, 32, 32), np.float32)
        if n >= 2:
            masks[0] = _ring(32, 32, 16, 16, 9, 4)  # a ring (hole filling) ...
            masks[1] = _ring(32, 32, 16, 15, 3, -1)  # ... and a disc inside its hole
            if kind != "logits":
                masks[:2] = (masks[:2] > 0).astype(np.float32)
        scores = rng.choice([0.3, 0.6, 0.6, 0.8, 0.95], n).astype(np.float32)  # ties
        dets.append((phrase, Detections(scores, np.zeros((n, 4), np.float32), masks, kind)))
    emb = type("E", (), {"image_shape": shape})()
    adapter = _Fixed(dets)
    for fill in (False, True):
        for min_area in (0, 40):
            got = search_slice(adapter, emb, ["a", "b"], _Texts(), floor=0.5,
                               min_area=min_area, fill_holes=fill, first_id=3)
            want = _reference(dets, shape, 0.5, min_area, fill, first_id=3)
            np.testing.assert_array_equal(got.labels, want.labels)
            assert got.instances == want.instances


def test_binary_masks_keeps_its_shape_and_values():
    rng = np.random.default_rng(9)
    masks = np.stack([_low(rng, 24, 24, "logits") for _ in range(3)])
    det = Detections(np.ones(3, np.float32), np.zeros((3, 4), np.float32), masks, "logits")
    out = binary_masks(det, (50, 70))
    assert out.shape == (3, 50, 70) and out.dtype == bool
    np.testing.assert_array_equal(out[1], upsample_logits(masks[1], (50, 70)) > 0)


def _interior_full(mask):
    padded = np.pad(np.asarray(mask, bool), 1)
    dist = ndimage.distance_transform_edt(padded)[1:-1, 1:-1]
    r, c = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return int(r), int(c)


def test_interior_point_on_the_bounding_box_equals_the_whole_slice():
    from napari_sam3_onnx.engine.tracking.steps import interior_point

    rng = np.random.default_rng(4)
    for _ in range(60):
        shape = tuple(int(x) for x in rng.integers(5, 120, 2))
        mask = np.zeros(shape, bool)
        for _ in range(int(rng.integers(1, 4))):
            r0, c0 = (int(rng.integers(0, s)) for s in shape)
            mask[r0:r0 + int(rng.integers(1, 30)), c0:c0 + int(rng.integers(1, 30))] = True
        mask &= rng.random(shape) > 0.05  # speckle: ties and holes
        assert interior_point(mask) == _interior_full(mask)
    assert interior_point(np.ones((7, 9), bool)) == _interior_full(np.ones((7, 9), bool))
    assert interior_point(np.zeros((4, 4), bool)) == (0, 0)


def test_label_writer_single_object_writes_only_free_pixels():
    from napari_sam3_onnx.engine.tracking.labels import LabelWriter
    from napari_sam3_onnx.engine.tracking.steps import SliceOutput

    labels = np.zeros((2, 6, 7), np.int32)
    labels[1, 2, 2] = 9
    mask = np.zeros((6, 7), bool)
    mask[1:4, 1:4] = True
    out = SliceOutput(mask, np.zeros((4, 4), np.float32), 1.0, 1.0)
    LabelWriter(labels)(1, {3: out})
    want = np.where(mask, 3, 0)
    want[2, 2] = 9
    np.testing.assert_array_equal(labels[1], want)
    assert not labels[0].any()


def test_autognosi_prepares_one_feed_for_both_encoders(tmp_path, monkeypatch):
    from napari_sam3_onnx.models.adapters import autognosi
    from napari_sam3_onnx.models.bundle import open_adapter
    from napari_sam3_onnx.testing.autognosi import build_autognosi

    adapter = open_adapter(build_autognosi(tmp_path))
    rgb = np.random.default_rng(5).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    before = adapter.encode(rgb)
    calls = []
    real = autognosi.encoder_feed
    monkeypatch.setattr(autognosi, "encoder_feed",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    after = adapter.encode(rgb)
    assert len(calls) == 1
    assert before.features.keys() == after.features.keys()
    for name in before.features:
        np.testing.assert_array_equal(before.features[name], after.features[name])
