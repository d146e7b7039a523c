"""Box prompts through the concept detector on a detector-only bundle (wkentaro v0.3 graphs)."""

import gzip

import numpy as np
import pytest

from napari_sam3_onnx.engine.concepts.detector_box import box_iou_xyxy
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.interactive_dispatch import segment_prompt
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import CapabilityError, PromptError
from napari_sam3_onnx.testing.scenes import BLOBS, planted_image
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

SHAPE = (60, 90)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = build_wkentaro_v03(tmp_path_factory.mktemp("wk03"))
    vocab = folder / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(vocab, "wt", encoding="utf-8") as f:
        f.write("#version\n")
    adapter = open_adapter(folder)
    texts = TextCache(adapter, ClipTokenizer.from_file(vocab))
    return adapter, adapter.encode(planted_image(SHAPE)), texts


@pytest.mark.parametrize("blob", BLOBS[:3], ids=lambda b: b.name)
def test_box_selects_the_boxed_blob(setup, blob):
    adapter, emb, texts = setup
    box = [blob.r0 - 1, blob.c0 - 1, blob.r1, blob.c1]
    res = segment_prompt(adapter, emb, Prompt.clicks(np.zeros((0, 2)), box_rc=box), texts)
    assert res.mask.shape == SHAPE and res.present
    inside = res.mask[blob.r0:blob.r1, blob.c0:blob.c1].mean()
    assert inside > 0.8
    outside = res.mask.copy()
    outside[max(blob.r0 - 3, 0):blob.r1 + 3, max(blob.c0 - 3, 0):blob.c1 + 3] = False
    assert outside.sum() == 0
    assert texts.calls == 1  # "visual" encoded once for all boxes


def test_box_on_background_finds_nothing(setup):
    adapter, emb, texts = setup
    res = segment_prompt(adapter, emb, Prompt.clicks(np.zeros((0, 2)), box_rc=[48, 70, 58, 85]),
                         texts)
    assert not res.mask.any() and not res.present


def test_clicks_are_refused_with_a_message(setup):
    adapter, emb, texts = setup
    with pytest.raises(PromptError, match="no click decoder"):
        segment_prompt(adapter, emb, Prompt.clicks([[5, 10]]), texts)
    with pytest.raises(CapabilityError):
        segment_prompt(adapter, emb, Prompt.clicks(np.zeros((0, 2)), box_rc=[1, 1, 9, 9]))


def test_box_iou():
    boxes = np.array([[0, 0, 2, 2], [1, 1, 3, 3], [5, 5, 6, 6]])
    ious = box_iou_xyxy(boxes, np.array([0, 0, 2, 2]))
    np.testing.assert_allclose(ious, [1.0, 1 / 7, 0.0])
