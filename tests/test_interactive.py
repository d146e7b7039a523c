"""Clicks and boxes through the engine on the HF tracker-pair test graphs."""

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx.engine.cache import EmbeddingCache
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import Prompt, segment
from napari_sam3_onnx.engine.postprocess import fill_holes, select_candidate, stability
from napari_sam3_onnx.models.base import Embedding, MaskCandidates, SamAdapter
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import PromptError

SHAPE = (60, 90)
BLOBS = ((15, 20, 6), (40, 65, 7))


@pytest.fixture(scope="module")
def adapter(hf_bundle):
    return open_adapter(hf_bundle)


@pytest.fixture(scope="module")
def embedding(adapter):
    rgb = np.repeat(blob_image(SHAPE, BLOBS)[..., None], 3, axis=2)
    return adapter.encode(rgb)


def _iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


@pytest.mark.parametrize("blob", BLOBS)
def test_click_segments_the_clicked_blob_only(adapter, embedding, blob):
    r, c, rad = blob
    res = segment(adapter, embedding, Prompt.clicks([[r, c]]))
    truth = disc(SHAPE, r, c, rad)
    assert res.mask.shape == SHAPE
    assert res.present and res.candidate in (0, 1, 2)
    assert _iou(res.mask, truth) > 0.75
    other = next(b for b in BLOBS if b != blob)
    assert not (res.mask & disc(SHAPE, other[0], other[1], other[2] + 2)).any()


def test_click_on_background_gives_nothing(adapter, embedding):
    res = segment(adapter, embedding, Prompt.clicks([[55, 5]]))
    assert not res.present and not res.mask.any()


def test_negative_click_shrinks_the_mask(adapter, embedding):
    r, c, _ = BLOBS[1]
    pos = segment(adapter, embedding, Prompt.clicks([[r, c]]))
    both = segment(adapter, embedding, Prompt.clicks([[r, c - 3], [r, c + 6]], [1, 0]))
    assert both.mask.sum() < pos.mask.sum() - 5
    assert not both.mask[r, c + 6]
    assert both.mask[r, c - 3]
    assert not (both.mask & ~pos.mask).any()


def test_box_gives_the_boxed_object(adapter, embedding):
    r, c, rad = BLOBS[0]
    box = [r - rad - 3, c - rad - 3, r + rad + 3, c + rad + 3]
    res = segment(adapter, embedding, Prompt.clicks(np.zeros((0, 2)), box_rc=box))
    assert _iou(res.mask, disc(SHAPE, r, c, rad)) > 0.75
    # reversed corners give the same object
    rev = segment(adapter, embedding, Prompt.clicks(np.zeros((0, 2)), box_rc=box[2:] + box[:2]))
    np.testing.assert_array_equal(rev.mask, res.mask)


def test_bad_prompts_raise_clear_errors(adapter, embedding):
    with pytest.raises(PromptError, match="inside the image"):
        segment(adapter, embedding, Prompt.clicks([[100, 5]]))
    with pytest.raises(PromptError, match="no area"):
        segment(adapter, embedding, Prompt.clicks(np.zeros((0, 2)), box_rc=[10, 10, 10, 50]))


def test_encoder_runs_once_per_slice(adapter):
    stack = np.stack([blob_image(SHAPE, BLOBS, value=v, dtype=np.uint16) for v in (1000, 3000)])
    enc = SliceEncoder(adapter, EmbeddingCache())
    refs = [SliceRef(stack, (z,), window=(0.0, 3000.0), source="s") for z in (0, 1, 0, 1, 1)]
    for ref in refs:
        segment(adapter, enc.embed(ref), Prompt.clicks([[15, 20]]))
    assert enc.encoder_calls == 2
    # a new contrast window is a new picture for the model
    enc.embed(SliceRef(stack, (0,), window=(0.0, 1000.0), source="s"))
    assert enc.encoder_calls == 3


def test_slice_with_dim_blob_follows_contrast_window(adapter):
    # z=0 blobs at 1000 of 3000 -> brightness 0.33 (just bright); with window 0..10000 -> dark
    stack = np.stack([blob_image(SHAPE, BLOBS, value=1000, dtype=np.uint16)])
    enc = SliceEncoder(adapter)
    bright = segment(adapter, enc.embed(SliceRef(stack, (0,), window=(0, 1500))),
                     Prompt.clicks([[15, 20]]))
    dark = segment(adapter, enc.embed(SliceRef(stack, (0,), window=(0, 10000))),
                   Prompt.clicks([[15, 20]]))
    assert bright.mask.sum() > 50 and not dark.mask.any()


def _cands(logits, iou, single_first):
    return MaskCandidates(np.asarray(logits, np.float32), np.asarray(iou, np.float32), 1.0,
                          single_first)


def test_candidate_rules():
    stable = np.full((4, 4), 5.0)
    unstable = np.linspace(-0.04, 0.04, 16).reshape(4, 4)
    four = _cands([stable, stable, stable, stable], [0.1, 0.2, 0.9, 0.3], True)
    assert select_candidate(four, 1) == 2  # one click: best multimask
    assert select_candidate(four, 3) == 0  # several points, stable single mask
    four_unstable = _cands([unstable, stable, stable, stable], [0.1, 0.2, 0.3, 0.9], True)
    assert stability(unstable) < 0.98
    assert select_candidate(four_unstable, 3) == 3
    three = _cands([stable] * 3, [0.5, 0.7, 0.6], False)
    assert select_candidate(three, 1) == 1 and select_candidate(three, 4) == 1


def test_fill_holes_fills_small_background_components_only():
    logits = np.full((20, 30), 5.0, np.float32)
    logits[5:7, 5:7] = -3  # 4-px hole
    logits[10:20, 15:30] = -3  # big background region
    out = fill_holes(logits, max_area=10)
    assert (out[5:7, 5:7] > 0).all() and (out[10:20, 15:30] < 0).all()


class _HoleyDecoder(SamAdapter):
    """Answers every prompt with one 24x24 mask: a ring (a 2x2 hole at rows/cols 11-12)."""

    layout = "holey"
    accepts_mask_input = False

    def __init__(self):
        self._attach_prompt_decoder(self)  # its own prompt-decoder role (a test double)

    @property
    def mask_size(self):
        return (24, 24)

    def predict_masks(self, embedding, points_xy, labels, mask_input=None):
        logits = np.full((1, 24, 24), -8.0, np.float32)
        logits[0, 8:16, 8:16] = 8.0
        logits[0, 11:13, 11:13] = -8.0
        return MaskCandidates(logits, np.array([0.9], np.float32), 3.0, False)


def test_holes_are_filled_for_display_but_not_in_the_fed_back_logits():
    emb = Embedding({}, (84, 84), (48, 48))
    res = segment(_HoleyDecoder(), emb, Prompt.clicks([[20, 20]]), fill_hole_area=10)
    assert res.mask[23:25, 23:25].all()  # the hole (low-res 11-12 -> slice 22-25) is shown filled
    assert (res.low_res_logits[11:13, 11:13] < 0).all()  # as the decoder said, for refinement
