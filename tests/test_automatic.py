"""Automatic masks on one plane: grid clicks, SAM's filters, NMS, labels (toy graphs)."""

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx.engine.automatic import AutoMaskSettings, segment_plane
from napari_sam3_onnx.engine.automatic.generate import AutoMask, decode_clicks, nms
from napari_sam3_onnx.engine.automatic.grid import crop_boxes, point_grid
from napari_sam3_onnx.engine.automatic.masks import (
    box_nms,
    remove_small_regions,
    stability_scores,
)
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

#: 336-px input, 96-px masks: fine enough for ~20-px blobs on a 150 x 230 plane.
GEOM = TestGeometry(grid=24)
SHAPE = (150, 230)
BLOBS = ((30, 40, 10), (100, 150, 9), (40, 190, 10), (112, 45, 10), (70, 100, 8))


@pytest.fixture(scope="module")
def steep(tmp_path_factory):
    return open_adapter(build_sloped_tracker(tmp_path_factory.mktemp("steep"), GEOM))


def _ref(img, name="img"):
    return SliceRef(img, (), False, None, name, 0)


def _iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


def test_default_grid_finds_each_planted_blob_exactly_once(steep):
    img = blob_image(SHAPE, BLOBS, value=255)
    res = segment_plane(steep, SliceEncoder(steep).embed, _ref(img))  # SAM's defaults
    assert res.labels.shape == SHAPE and res.labels.dtype == np.int32
    assert len(res.instances) == len(BLOBS)
    assert sorted(np.unique(res.labels)) == list(range(len(BLOBS) + 1))
    for r, c, rad in BLOBS:  # each blob is one label, and that label is only this blob
        ids = np.unique(res.labels[disc(SHAPE, r, c, rad // 2)])
        assert len(ids) == 1 and ids[0] > 0
        assert _iou(res.labels == ids[0], disc(SHAPE, r, c, rad)) > 0.7
    for inst in res.instances:
        assert inst.area == np.count_nonzero(res.labels == inst.id)
        assert inst.score > 0.88 and inst.stability > 0.95


def test_ids_follow_score_and_background_gives_nothing(tmp_path):
    ad = open_adapter(build_sloped_tracker(tmp_path, GEOM, ious=(0.95, 0.9, 0.89)))
    img = blob_image(SHAPE, BLOBS[:2], value=255)
    res = segment_plane(ad, SliceEncoder(ad).embed, _ref(img), AutoMaskSettings(16))
    scores = [i.score for i in res.instances]
    assert scores == sorted(scores, reverse=True)
    assert [i.id for i in res.instances] == list(range(1, len(scores) + 1))
    dark = np.zeros(SHAPE, np.uint8)
    assert not segment_plane(ad, SliceEncoder(ad).embed, _ref(dark, "dark"),
                             AutoMaskSettings(16)).instances


def test_pred_iou_thresh_drops_low_quality_tokens(steep):
    img = blob_image(SHAPE, BLOBS, value=255)
    res = segment_plane(steep, SliceEncoder(steep).embed, _ref(img),
                        AutoMaskSettings(16, pred_iou_thresh=0.95))
    assert not res.instances  # the toy's best token claims 0.9


def test_stability_score_counts_pixels_near_the_threshold():
    logits = np.zeros((2, 4, 5), np.float32)
    logits[0, :2] = 3.0   # 10 px well above +1
    logits[0, 2] = 0.5    # 5 px between -1 and +1: inside the band
    logits[0, 3] = -3.0
    logits[1, :3] = 3.0
    logits[1, 3] = -3.0
    np.testing.assert_allclose(stability_scores(logits, 1.0), [10 / 15, 1.0])
    np.testing.assert_allclose(stability_scores(logits, 0.25), [1.0, 1.0])


def test_stability_filter_drops_shallow_logits(tmp_path):
    # same masks, same predicted IoU; only the logit slope differs between tokens
    ad = open_adapter(build_sloped_tracker(tmp_path, GEOM, slopes=(0.05, 0.05, 20.0),
                                          ious=(0.95, 0.95, 0.95)))
    bright = np.full(SHAPE, 255, np.uint8)  # no brightness edge: the radius sets the contour
    bright[0, 0] = 254  # (not quite constant: a constant plane is blank and encodes as black)
    emb = SliceEncoder(ad).embed(_ref(bright, "bright"))
    xy = np.array([[168.0, 168.0]], np.float32)
    _, logits, _, _ = next(decode_clicks(ad, emb, xy, 1))
    stab = stability_scores(logits, 1.0)
    assert stab[0] < 0.5 and stab[1] < 0.5 and stab[2] > 0.95
    res = segment_plane(ad, SliceEncoder(ad).embed, _ref(bright, "bright"),
                        AutoMaskSettings(1))
    # one click in the middle: the only mask kept is the steep token's 0.4 x S disc
    assert len(res.instances) == 1 and res.instances[0].stability > 0.95
    # ... an ellipse of semi-axes 0.4 x (rows, cols) around the plane's centre
    expected = np.pi * (0.4 * SHAPE[0]) * (0.4 * SHAPE[1])
    assert abs(res.instances[0].area - expected) < 0.1 * expected


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30], [0, 0, 10, 4]], float)
    scores = np.array([0.8, 0.9, 0.5, 0.7])
    # box 1 (best) suppresses box 0 (IoU 9/11); box 3 overlaps box 1 by 4/11 < 0.7: kept
    assert box_nms(boxes, scores, 0.7).tolist() == [1, 3, 2]
    assert box_nms(boxes, scores, 0.3).tolist() == [1, 2]


def test_nms_removes_duplicate_masks_from_neighbouring_clicks():
    m = np.ones((10, 10), bool)  # two clicks on one object, the mask shifted by one pixel
    a = AutoMask((10, 10, 20, 20), m, 0.9, 0.99, (0, 0, 50, 50), (12, 12))
    b = AutoMask((10, 11, 20, 21), m, 0.95, 0.99, (0, 0, 50, 50), (12, 13))
    c = AutoMask((30, 30, 40, 40), m, 0.91, 0.99, (0, 0, 50, 50), (32, 32))
    kept = nms([a, b, c], 0.7)
    assert [k.point_rc for k in kept] == [(12, 13), (32, 32)]


def test_small_holes_and_islands_are_removed():
    mask = np.zeros((30, 40), bool)
    mask[5:25, 5:30] = True
    mask[10:12, 10:12] = False  # 4-px hole
    mask[2, 36] = True          # 1-px island
    clean, changed = remove_small_regions(mask, 10)
    assert changed and clean[10:12, 10:12].all() and not clean[2, 36]
    assert not remove_small_regions(clean, 10)[1]
    tiny = np.zeros((10, 10), bool)
    tiny[1, 1] = tiny[5:7, 5:7] = True  # every island small: the biggest stays
    out, _ = remove_small_regions(tiny, 50)
    assert out.sum() == 4 and out[5, 5]


def test_point_grid_and_crops_follow_sam():
    g = point_grid(4)
    np.testing.assert_allclose(sorted(set(g[:, 0])), [0.125, 0.375, 0.625, 0.875])
    assert g[1].tolist() == [0.375, 0.125]  # x varies fastest
    boxes = crop_boxes((150, 230), 1, 512 / 1500)
    assert boxes[0] == ((0, 0, 150, 230), 0) and len(boxes) == 5
    for (r0, c0, r1, c1), layer in boxes[1:]:
        assert layer == 1 and 0 <= r0 < r1 <= 150 and 0 <= c0 < c1 <= 230
    # the four crops cover the plane and overlap by int(0.341 * 150) = 51 px
    assert boxes[1][0][2] - boxes[3][0][0] == 51


def test_crop_layers_find_the_same_objects_once(steep):
    # blobs small enough that the toy's click radius holds them whole on a half-size crop too
    small = [(r, c, 6) for r, c, _ in BLOBS]
    img = blob_image(SHAPE, small, value=255)
    enc = SliceEncoder(steep)
    res = segment_plane(steep, enc.embed, _ref(img), AutoMaskSettings(16, crop_n_layers=1))
    assert enc.encoder_calls == 5  # the plane and four crops, each once
    assert len(res.instances) == len(BLOBS)
    for r, c, _ in small:
        assert len(np.unique(res.labels[r - 2:r + 3, c - 2:c + 3])) == 1


def test_tiled_plane_joins_objects_across_tile_edges(steep):
    from napari_sam3_onnx.engine.tiling.tiles import TileSettings

    shape = (150, 400)
    blobs = ((40, 112, 8), (100, 150, 8), (75, 260, 8), (30, 330, 7), (120, 30, 8))
    img = blob_image(shape, blobs, value=255)
    enc = SliceEncoder(steep)
    tiling = TileSettings(size=150, threshold=150)
    res = segment_plane(steep, enc.embed, _ref(img, "wide"), AutoMaskSettings(12), tiling)
    assert enc.encoder_calls > 2  # really tiled
    assert len(res.instances) == len(blobs)
    for r, c, rad in blobs:
        ids = np.unique(res.labels[disc(shape, r, c, rad // 2)])
        assert len(ids) == 1 and ids[0] > 0
        assert _iou(res.labels == ids[0], disc(shape, r, c, rad)) > 0.6


class _PerObject:
    """A decoder session with a batch axis, emulated by running the real one per object."""

    def __init__(self, session):
        self.session = session

    def run(self, names, feeds):
        parts = [self.session.run(names, {**feeds, "point_coords": feeds["point_coords"][b:b + 1],
                                          "point_labels": feeds["point_labels"][b:b + 1]})
                 for b in range(len(feeds["point_coords"]))]
        return {n: np.concatenate([p[n] for p in parts]) for n in names}


def test_nso_batched_decoding_matches_one_call_per_click(tmp_path):
    from napari_sam3_onnx.testing.nso import build_nso

    ad = open_adapter(build_nso(tmp_path))
    img = np.repeat(blob_image((60, 90), ((15, 20, 6), (40, 65, 7)))[..., None], 3, axis=2)
    emb = ad.encode(img)
    xy = np.array([[25.0, 20.0], [60.0, 55.0], [5.0, 80.0]], np.float32)
    decoder = ad.prompt_decoder
    single = decoder.predict_point_batch(emb, xy)  # the toy graph has batch 1: one call per click
    decoder.batched, decoder.session = True, _PerObject(decoder.session)
    batched = decoder.predict_point_batch(emb, xy)
    for a, b in zip(single, batched, strict=True):
        np.testing.assert_array_equal(a.logits, b.logits)
        np.testing.assert_array_equal(a.iou, b.iou)
        assert a.object_score == b.object_score
        np.testing.assert_array_equal(a.extras["object_pointer"], b.extras["object_pointer"])


class _Counting(_PerObject):
    """:class:`_PerObject` that notes the batch of every call."""

    def __init__(self, session):
        super().__init__(session)
        self.batches: list[int] = []

    def run(self, names, feeds):
        self.batches.append(len(feeds["point_coords"]))
        return super().run(names, feeds)


def test_nso_batched_decoding_caps_the_clicks_per_call(tmp_path):
    # A call repeats the image per click inside the graph: 64 clicks held 4.8 GB at full depth.
    from napari_sam3_onnx.models.adapters._nso_roles import MAX_CLICKS_PER_CALL
    from napari_sam3_onnx.testing.nso import build_nso

    ad = open_adapter(build_nso(tmp_path))
    img = np.repeat(blob_image((60, 90), ((15, 20, 6), (40, 65, 7)))[..., None], 3, axis=2)
    emb = ad.encode(img)
    n = 2 * MAX_CLICKS_PER_CALL + 3
    xy = np.stack([np.linspace(3, 80, n), np.linspace(50, 5, n)], 1).astype(np.float32)
    decoder = ad.prompt_decoder
    single = [decoder.predict_masks(emb, p[None], np.ones(1, np.int64)) for p in xy]
    counting = _Counting(decoder.session)
    decoder.batched, decoder.session = True, counting
    batched = decoder.predict_point_batch(emb, xy)
    assert counting.batches == [MAX_CLICKS_PER_CALL, MAX_CLICKS_PER_CALL, 3]
    assert len(batched) == n
    for a, b in zip(single, batched, strict=True):
        np.testing.assert_array_equal(a.logits, b.logits)
        np.testing.assert_array_equal(a.iou, b.iou)


def test_nso_decoder_session_reuses_its_buffers(tmp_path):
    # Without onnxruntime's CPU arena a 16-click call cost 3x more per click (fresh pages).
    from napari_sam3_onnx.testing.nso import build_nso

    ad = open_adapter(build_nso(tmp_path))
    assert ad.decoder.config.cpu_mem_arena
    assert not ad.encoder.config.cpu_mem_arena  # the encoder keeps the default (peak memory)
    assert ad.decoder.session.get_session_options().enable_cpu_mem_arena
