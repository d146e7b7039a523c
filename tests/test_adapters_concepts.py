"""Concept-detector layouts, checked the same way on every one of them.

Each bundle is a set of toy graphs with the real names/dtypes/ranks (napari_sam3_onnx.testing.*);
the image is a non-square scene with blobs at known places (testing.scenes), so the expected
detections follow from where the blobs were painted, not from stored answers.
"""

from __future__ import annotations

import shutil
from functools import partial

import numpy as np
import pytest

from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import LayoutMismatchError, UnknownLayoutError
from napari_sam3_onnx.models.imageops import resize_bilinear, resize_rgb_uint8
from napari_sam3_onnx.testing.autognosi import build_autognosi
from napari_sam3_onnx.testing.comicapp import build_comicapp
from napari_sam3_onnx.testing.concepts import EOT, SOT, TOKEN_ANY, TOKEN_BRIGHT, TOKEN_NOTHING
from napari_sam3_onnx.testing.samexporter import build_samexporter
from napari_sam3_onnx.testing.scenes import (
    INSTANCES,
    brightness,
    check_instances,
    planted_image,
)
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03, build_wkentaro_v06

SHAPE = (60, 90)
C = Capability
BUILDERS = {
    "wkentaro-v0.3": build_wkentaro_v03,
    "wkentaro-v0.6": build_wkentaro_v06,
    "samexporter-0.5": build_samexporter,
    "samexporter-pruned": partial(build_samexporter, pruned=True, slots=3),
    "autognosi-int8": build_autognosi,
    "comicapp-sam3.1": build_comicapp,
}
LAYOUT = {"samexporter-pruned": "samexporter-0.5"}
CAPS = {
    "wkentaro-v0.3": {C.ENCODE, C.TEXT, C.EXEMPLARS, C.BOXES},
    "wkentaro-v0.6": {C.ENCODE, C.TEXT, C.EXEMPLARS, C.BOXES, C.CLICKS},
    "samexporter-0.5": {C.ENCODE, C.TEXT, C.EXEMPLARS, C.BOXES},
    "samexporter-pruned": {C.ENCODE, C.TEXT, C.EXEMPLARS, C.BOXES},
    "autognosi-int8": {C.ENCODE, C.TEXT, C.CLICKS, C.BOXES},
    "comicapp-sam3.1": {C.ENCODE, C.TEXT, C.EXEMPLARS, C.BOXES},
}
LEVEL0 = {"autognosi-int8": ("fpn_0", "fpn_1", "fpn_2"),
          "comicapp-sam3.1": ("image_features_0", "image_features_1", "image_features_2")}
WITH_EXEMPLARS = [k for k, caps in CAPS.items() if C.EXEMPLARS in caps]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("concept_bundles")
    return {key: build(root / key) for key, build in BUILDERS.items()}


@pytest.fixture(scope="module")
def opened(folders):
    return {key: open_adapter(folder) for key, folder in folders.items()}


@pytest.fixture(scope="module")
def rgb():
    return planted_image(SHAPE)


@pytest.fixture(scope="module")
def embeddings(opened, rgb):
    return {key: a.encode(rgb) for key, a in opened.items()}


def text(adapter, token):
    return adapter.concept_detector.encode_text([SOT, token, EOT])


@pytest.mark.parametrize("key", BUILDERS)
def test_recognised_with_capabilities(opened, key):
    adapter = opened[key]
    assert adapter.layout == LAYOUT.get(key, key)
    assert set(adapter.capabilities) == CAPS[key]
    assert adapter.input_size == (84, 84) and adapter.mask_size == (24, 24)
    assert adapter.concept_detector.context_length == 32


def _graph_files(folder):
    return sorted(p.name for p in folder.glob("*.onnx"))


@pytest.mark.parametrize("key", [k for k in BUILDERS if k != "samexporter-pruned"])
def test_folder_missing_a_graph_is_refused(folders, tmp_path, key):
    for name in _graph_files(folders[key]):
        if key == "comicapp-sam3.1" and name.startswith("sam31_prompt"):
            continue  # either prompt graph alone is a usable bundle (see the comicapp tests)
        partial_dir = tmp_path / f"{key}-{name}"
        shutil.copytree(folders[key], partial_dir)
        (partial_dir / name).unlink()
        with pytest.raises((UnknownLayoutError, LayoutMismatchError)) as info:
            open_adapter(partial_dir)
        message = str(info.value)
        if isinstance(info.value, LayoutMismatchError):
            assert "also needs" in message, message
        for other in _graph_files(partial_dir):  # what was found is listed
            assert other.split(".")[0] in message, (name, message)


@pytest.mark.parametrize("key", BUILDERS)
def test_encode_channel0_is_resampled_brightness(opened, embeddings, rgb, key):
    adapter, emb = opened[key], embeddings[key]
    size = adapter.input_size
    gray = brightness(resize_rgb_uint8(rgb, size))
    names = LEVEL0.get(key, ("backbone_fpn_0", "backbone_fpn_1", "backbone_fpn_2"))
    tol = 2e-3 if key.startswith("comicapp") else 1e-4  # float16 encoder
    for name in names:
        feat = emb.features[name]
        assert feat.dtype == np.float32 and feat.shape[:2] == (1, feat.shape[1])
        want = resize_bilinear(gray, feat.shape[-2:], antialias=False)
        np.testing.assert_allclose(feat[0, 0], want, atol=tol)
        assert np.abs(feat[0, 1:]).max() == 0
    assert emb.image_shape == SHAPE and emb.input_size == size
    assert not any(n.startswith("vision_pos_enc") for n in emb.features)


@pytest.mark.parametrize("key", BUILDERS)
@pytest.mark.parametrize("token", [TOKEN_ANY, TOKEN_BRIGHT, TOKEN_NOTHING])
def test_detect_finds_exactly_the_planted_instances(opened, embeddings, key, token):
    adapter = opened[key]
    det = adapter.concept_detector.detect(embeddings[key], text(adapter, token))
    level = {TOKEN_ANY: 0.25, TOKEN_BRIGHT: 0.7, TOKEN_NOTHING: 1.0}[token]
    expected = [b for b in INSTANCES if b.value / 255 > level]
    check_instances(det, expected, SHAPE)
    assert det.masks.shape[1:] == adapter.mask_size and det.boxes.shape == (len(det), 4)


@pytest.mark.parametrize("key", WITH_EXEMPLARS)
def test_exemplar_slots_zero_one_and_all(opened, embeddings, key):
    adapter, emb = opened[key], embeddings[key]
    t = text(adapter, TOKEN_ANY)
    bright, mid = INSTANCES[0], INSTANCES[2]
    base = adapter.concept_detector.detect(emb, t)
    none = adapter.concept_detector.detect(emb, t, np.zeros((0, 4), np.float32),
                                          np.zeros(0, np.int64))
    np.testing.assert_allclose(none.scores, base.scores)  # padded slots are inert
    one = adapter.concept_detector.detect(emb, t, mid.box_cxcywh(SHAPE, 0.6)[None], np.array([1]))
    check_instances(one, [mid], SHAPE)
    k = adapter.concept_detector.max_exemplars
    assert k is not None and k >= 1
    boxes = [mid.box_cxcywh(SHAPE, 0.6)] + [bright.box_cxcywh(SHAPE, 0.3 + 0.02 * i)
                                            for i in range(k - 1)]
    labels = [True] + [False] * (k - 1)
    full = adapter.concept_detector.detect(emb, t, np.stack(boxes), np.array(labels))
    check_instances(full, [mid], SHAPE)
    if k >= 2:  # a negative exemplar alone removes the instances of its brightness
        neg = adapter.concept_detector.detect(emb, t, bright.box_cxcywh(SHAPE, 0.5)[None],
                                              np.array([0]))
        check_instances(neg, [mid], SHAPE)
    with pytest.raises(ValueError, match=f"at most {k} exemplar"):
        adapter.concept_detector.detect(emb, t, np.stack([mid.box_cxcywh(SHAPE)] * (k + 1)))
    with pytest.raises(ValueError, match="no area"):
        adapter.concept_detector.detect(emb, t, np.array([[0.5, 0.5, 0.0, 0.1]], np.float32))


@pytest.mark.parametrize("key", ["samexporter-0.5", "comicapp-sam3.1", "autognosi-int8"])
def test_raw_scores_are_logit_times_presence(opened, embeddings, key, monkeypatch):
    adapter = opened[key]
    raw = {}
    session = {"samexporter-0.5": lambda a: a.decoder, "comicapp-sam3.1":
               lambda a: a.prompts["side"][0], "autognosi-int8":
               lambda a: a.sessions["detector"]}[key](adapter)
    original = session.run

    def spy(outputs, feeds):
        raw.update(original(outputs, feeds))
        return {k: raw[k] for k in outputs}

    monkeypatch.setattr(session, "run", spy)
    det = adapter.concept_detector.detect(embeddings[key], text(adapter, TOKEN_ANY))
    logits = next(raw[k] for k in raw if k == "pred_logits").reshape(-1)
    presence = next(raw[k] for k in raw if k.startswith("presence")).reshape(-1)[0]
    want = 1 / (1 + np.exp(-logits.astype(np.float64))) / (1 + np.exp(-float(presence)))
    np.testing.assert_allclose(det.scores, want, rtol=1e-5)
    assert det.min_score == 0.0 and len(det) == logits.size  # every query, no cut
    assert (det.scores < 0.5).any() and (det.scores > 0.5).any()


def test_text_prompts_are_padded_and_bounded(opened):
    wk = opened["wkentaro-v0.3"]
    mask = wk.concept_detector.encode_text([SOT, TOKEN_ANY, 123, EOT]).features["language_mask"]
    assert mask.dtype == np.bool_ and mask.sum() == 32 - 4 and not mask[0, :4].any()
    for adapter in opened.values():
        with pytest.raises(ValueError, match="too long"):
            adapter.concept_detector.encode_text([SOT] + [TOKEN_ANY] * 31 + [EOT])
        with pytest.raises(ValueError, match="empty"):
            adapter.concept_detector.encode_text([])
