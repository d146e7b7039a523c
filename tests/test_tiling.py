"""Tiles and fields of view: grid geometry, prompt placement, clicks on the toy SAM head.

The toy head's input is 84 px, so a 600 x 900 plane is squeezed ~7-11x: 7-px blobs become
sub-pixel specks below its brightness threshold. Tiles of 84 px (the default: one model input
at 1:1) keep them at full size. Blob positions are asymmetric, so a swapped row/col offset
anywhere lands on the wrong pixels.
"""

from dataclasses import replace

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tiling.tiled import (
    _local_prompt,
    segment_on,
    segment_tiled,
    tile_refs,
    with_plane_window,
)
from napari_sam3_onnx.engine.tiling.tiles import (
    TileSettings,
    as_tiling,
    fov_region,
    fov_reusable,
    pick_tile,
    tile_grid,
    touches_inner_edge,
)
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import PromptError

SHAPE = (600, 900)
SMALL = ((47, 611, 3), (233, 95, 3), (402, 770, 3), (555, 318, 3), (120, 402, 3))


def _iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


@pytest.fixture(scope="module")
def adapter(hf_bundle):
    return open_adapter(hf_bundle)


# ---- geometry -------------------------------------------------------------------------------
def test_grid_covers_the_plane_with_square_overlapping_tiles():
    grid = tile_grid(SHAPE, 170, 40)
    cover = np.zeros(SHAPE, int)
    for r0, c0, r1, c1 in grid:
        assert (r1 - r0, c1 - c0) == (170, 170)
        cover[r0:r1, c0:c1] += 1
    assert cover.min() >= 1
    rows, cols = sorted({b[0] for b in grid}), sorted({b[1] for b in grid})
    assert rows == [0, 130, 260, 390, 430] and cols == [0, 130, 260, 390, 520, 650, 730]
    assert grid[1] == (0, 130, 170, 300)  # row-major: the second tile is to the right
    assert tile_grid((50, 900), 170, 40)[0] == (0, 0, 50, 170)  # a thin plane: thin tiles


def test_settings_follow_the_model_input():
    s = TileSettings()
    assert (s.side(1008), s.overlap_px(1008), s.margin_px(1008), s.threshold_px(1008)) == (
        1008, 252, 126, 2016)
    assert TileSettings(downscale=2.0).side(1008) == 2016
    assert s.applies((1000, 2048), 1008) and not s.applies((2016, 2016), 1008)
    assert as_tiling(512) == TileSettings(size=512, threshold=512) and as_tiling(None) is None
    with pytest.raises(ValueError):
        as_tiling(1)


def test_pick_tile_prefers_margin_and_centres_otherwise():
    grid = tile_grid(SHAPE, 170, 40)
    # near the plane's corner: plane edges cut nothing, the corner tile is fine
    assert pick_tile(grid, (3, 5, 3, 5), SHAPE, 170, 20) == (0, 0, 170, 170)
    # 4 px above tile row 0's bottom edge, 35 px below row 1's top edge: row 1 wins
    assert pick_tile(grid, (165, 300, 165, 300), SHAPE, 170, 20)[0] == 130
    # a box no tile holds with 20 px to spare: a tile centred on it, grown to fit
    tile = pick_tile(grid, (100, 140, 260, 300), SHAPE, 170, 20)
    assert tile not in grid and tile[2] - tile[0] >= 201 and tile[3] - tile[1] >= 201
    assert tile[0] <= 80 and tile[2] >= 281 and tile[1] <= 120 and tile[3] >= 321
    assert touches_inner_edge((10, 160, 20, 170), (0, 0, 170, 170), SHAPE)
    assert not touches_inner_edge((0, 0, 20, 20), (0, 0, 170, 170), SHAPE)


def test_fov_region_is_snapped_padded_and_reused_for_small_pans():
    view = (100.2, 250.7, 163.9, 330.1)  # rows, cols in data coordinates
    box = fov_region(view, SHAPE)
    seen = fov_region(view, SHAPE, step=1, pad=0)
    assert seen == (100, 251, 165, 331)
    assert all(v % 4 == 0 for v in box) and box[0] < 100 and box[3] > 331
    assert fov_reusable(box, fov_region((102.2, 253.7, 165.9, 333.1), SHAPE, 1, 0))  # 2-3 px
    assert not fov_reusable(box, fov_region((130.0, 290.0, 194.0, 370.0), SHAPE, 1, 0))
    assert not fov_reusable(box, fov_region((120.0, 270.0, 150.0, 310.0), SHAPE, 1, 0))  # zoom
    assert fov_region((-50.0, 850.0, 20.0, 990.0), SHAPE) == (0, 844, 28, 900)
    assert fov_region((700.0, 0.0, 800.0, 100.0), SHAPE) is None


# ---- encoding -----------------------------------------------------------------------------
def test_tiles_of_a_uint16_plane_share_the_plane_window():
    plane = np.zeros((300, 500), np.uint16)
    plane[:50, :50] = 4000  # bright only in the top-left corner
    plane[250:, 400:] = 900
    ref = SliceRef(plane, (), source="u16")
    tiles = tile_refs(ref, TileSettings(size=100, threshold=100), 84)
    assert len(tiles) == 4 * 7 and {t.window for t in tiles} == {(0.0, 4000.0)}
    enc = SliceEncoder(adapter=None)  # only its image path is used
    far = next(t for t in tiles if t.region[0] >= 200 and t.region[1] >= 400)
    assert enc.rgb(far).max() == round(900 * 255 / 4000)  # not stretched to 255 in this tile
    assert with_plane_window(SliceRef(plane.astype(np.uint8), ())).window is None
    small = tile_refs(SliceRef(plane[:100, :150], ()), TileSettings(), 84)  # below 2 x 84
    assert len(small) == 1 and small[0].region is None and small[0].window is None


# ---- clicks on the toy SAM head -------------------------------------------------------------
def test_small_blobs_lost_when_squeezed_are_found_on_tiles(adapter):
    img = blob_image(SHAPE, SMALL, value=220)
    ref = SliceRef(img, (), source="small")
    whole, tiles = SliceEncoder(adapter), SliceEncoder(adapter)
    for r, c, rad in SMALL:
        truth = disc(SHAPE, r, c, rad)
        lost = segment_on(adapter, whole.embed, ref, Prompt.clicks([[r, c]]))
        found = segment_on(adapter, tiles.embed, ref, Prompt.clicks([[r, c]]),
                           tiling=TileSettings())
        assert _iou(lost.mask, truth) < 0.1
        assert found.mask.shape == SHAPE and _iou(found.mask, truth) > 0.45
        rr, cc = np.nonzero(found.mask)
        assert abs(rr.mean() - r) < 2 and abs(cc.mean() - c) < 2
        t = found.region
        assert t[2] - t[0] == 84 and t[3] - t[1] == 84 and t[0] <= r < t[2] and t[1] <= c < t[3]
    assert whole.encoder_calls == 1 and tiles.encoder_calls == len(SMALL)  # one tile per click


def test_click_near_a_tile_corner_lands_on_the_right_object(adapter):
    # default grid: tiles start every 63 px (84 px, 21 overlap); (84, 84) is tile 0's corner
    blobs = ((78, 90, 4), (94, 74, 4), (300, 500, 5))
    img = blob_image((320, 530), blobs, value=220)
    ref = SliceRef(img, (), source="corner")
    enc = SliceEncoder(adapter)
    for r, c, rad in blobs[:2]:
        res = segment_on(adapter, enc.embed, ref, Prompt.clicks([[r, c]]), tiling=TileSettings())
        assert _iou(res.mask, disc((320, 530), r, c, rad)) > 0.5
        other = next(b for b in blobs[:2] if b[:2] != (r, c))
        assert not (res.mask & disc((320, 530), *other)).any()


def test_object_cut_by_a_tile_edge_is_prompted_again_and_comes_out_whole(adapter):
    shape = (300, 420)
    blob = (40, 86, 8)  # across the edge between tiles [0, 84) and [84, 168)
    img = blob_image(shape, (blob, (200, 300, 6)), value=220)
    ref = SliceRef(img, (), source="cut")
    settings = TileSettings(overlap=0, margin=0)
    enc = SliceEncoder(adapter)
    click = Prompt.clicks([[40, 89]])
    cut = segment_tiled(adapter, enc.embed, ref, click, settings, max_moves=0)
    whole = segment_tiled(adapter, enc.embed, ref, click, settings)
    truth = disc(shape, *blob)
    assert cut.region == (0, 84, 84, 168) and not cut.mask[:, :84].any()
    assert _iou(cut.mask, truth) < 0.75
    assert whole.region != cut.region and _iou(whole.mask, truth) > 0.75
    t = whole.region
    assert t[1] < 78 and t[3] > 94  # the new tile holds the whole blob
    assert enc.encoder_calls == 2


def test_prompt_off_a_tiled_plane_is_refused_without_encoding(adapter):
    enc = SliceEncoder(adapter)
    ref = SliceRef(np.zeros(SHAPE, np.uint8), (), source="off")
    with pytest.raises(PromptError, match="inside the image"):
        segment_on(adapter, enc.embed, ref, Prompt.clicks([[700, 10]]), tiling=TileSettings())
    outside = Prompt.clicks(np.zeros((0, 2)), box_rc=[5, 950, 9, 990])
    with pytest.raises(PromptError, match="box"):
        segment_on(adapter, enc.embed, ref, outside, tiling=TileSettings())
    assert enc.encoder_calls == 0


def test_field_of_view_is_encoded_once_and_masks_land_on_the_plane(adapter):
    img = blob_image(SHAPE, SMALL, value=220)
    ref = SliceRef(img, (), source="fov")
    enc = SliceEncoder(adapter)
    view = replace(ref, region=(180, 40, 280, 160))  # 100 x 120 around blob (233, 95)
    first = segment_on(adapter, enc.embed, view, Prompt.clicks([[233, 95]]))
    again = segment_on(adapter, enc.embed, view, Prompt.clicks([[233, 96], [235, 95]]))
    assert enc.encoder_calls == 1
    assert first.region == (180, 40, 280, 160) and first.mask.shape == SHAPE
    assert _iou(first.mask, disc(SHAPE, 233, 95, 3)) > 0.4 and again.mask[233, 95]
    segment_on(adapter, enc.embed, replace(ref, region=(0, 560, 100, 660)),
               Prompt.clicks([[47, 611]]))
    assert enc.encoder_calls == 2


def test_old_logits_are_fed_back_only_on_their_own_region():
    logits = np.ones((24, 24), np.float32)
    prompt = Prompt(np.array([[50.0, 70.0]]), np.array([1]), np.array([40.0, 60, 60, 80]),
                    logits, (0, 0, 84, 84))
    same = _local_prompt(prompt, (0, 0, 84, 84))
    other = _local_prompt(prompt, (21, 42, 105, 126))
    assert same.mask_logits is logits and other.mask_logits is None
    np.testing.assert_allclose(other.points_rc, [[29.0, 28.0]])
    np.testing.assert_allclose(other.box_rc, [19.0, 18.0, 39.0, 38.0])
    assert other.mask_region == (21, 42, 105, 126)
