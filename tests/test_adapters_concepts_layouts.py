"""Layout-specific behaviour of the concept adapters: baked score cut, cached position
encodings, point decoders, Autognosi's bit-packed masks, ComicApp introspection, full geometry."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx.models.adapters import autognosi as autognosi_module
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import CapabilityError, LayoutMismatchError
from napari_sam3_onnx.testing.autognosi import build_autognosi
from napari_sam3_onnx.testing.comicapp import build_comicapp, build_prompt
from napari_sam3_onnx.testing.concepts import EOT, SOT, TOKEN_ANY, TOKEN_BRIGHT
from napari_sam3_onnx.testing.geometry import FULL, SMALL
from napari_sam3_onnx.testing.samexporter import build_samexporter
from napari_sam3_onnx.testing.scenes import INSTANCES, check_instances, planted_image
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03, build_wkentaro_v06

SHAPE = (60, 90)
RGB = planted_image(SHAPE)
BRIGHT, MID = INSTANCES[0], INSTANCES[2]


def words(adapter, token=TOKEN_ANY):
    return adapter.concept_detector.encode_text([SOT, token, EOT])


def record_runs(monkeypatch, session):
    calls = []
    original = session.run

    def spy(outputs, feeds):
        calls.append((list(outputs), dict(feeds)))
        return original(outputs, feeds)

    monkeypatch.setattr(session, "run", spy)
    return calls


@pytest.fixture(scope="module")
def wk03(tmp_path_factory):
    return open_adapter(build_wkentaro_v03(tmp_path_factory.mktemp("wk03")))


@pytest.fixture(scope="module")
def sx(tmp_path_factory):
    return open_adapter(build_samexporter(tmp_path_factory.mktemp("sx")))


def test_wkentaro_scores_are_cut_at_half_in_graph(wk03, sx):
    det = wk03.concept_detector.detect(wk03.encode(RGB), words(wk03))
    raw = sx.concept_detector.detect(sx.encode(RGB), words(sx))  # same toy semantics, raw heads
    assert det.min_score == 0.5 and det.mask_kind == "probabilities"
    assert ((raw.scores > 0.05) & (raw.scores <= 0.5)).any()  # there was something to cut
    np.testing.assert_allclose(np.sort(det.scores), np.sort(raw.scores[raw.scores > 0.5]),
                               rtol=1e-5)
    assert (det.masks >= 0).all() and (det.masks <= 1).all()


@pytest.mark.parametrize("key", ["wk03", "sx"])
def test_position_encodings_fetched_once(tmp_path, monkeypatch, key):
    build = build_wkentaro_v03 if key == "wk03" else build_samexporter
    adapter = open_adapter(build(tmp_path / key))
    calls = record_runs(monkeypatch, adapter.encoder)
    first, second = adapter.encode(RGB), adapter.encode(RGB[::-1].copy())
    asked_first, asked_second = calls[0][0], calls[1][0]
    wanted = {"vision_pos_enc_2"} if key == "wk03" else {f"vision_pos_enc_{i}" for i in range(3)}
    assert {n for n in asked_first if n.startswith("vision_pos")} == wanted
    assert not any(n.startswith("vision_pos") for n in asked_second)
    assert set(first.features) == set(second.features) == {f"backbone_fpn_{i}" for i in range(3)}
    # A fresh adapter given a cached embedding fetches the constants itself.
    fresh = open_adapter(adapter.encoder.path.parent)
    check_instances(fresh.concept_detector.detect(first, words(fresh)), INSTANCES, SHAPE)
    # The toy decoder checks the position encoding: a wrong one finds nothing.
    right = fresh.concepts.constants()
    assert right  # the decoder takes position encodings
    fresh.concepts.constants = lambda: {k: np.zeros_like(v) for k, v in right.items()}
    check_instances(fresh.concept_detector.detect(first, words(fresh)), [], SHAPE)


@pytest.mark.parametrize("names", [None, {
    "image_embeddings": "image_embed", "high_res_features1": "high_res_feats_0",
    "high_res_features2": "feat_s1_unknown", "point_coords": "input_points",
    "point_labels": "input_labels", "iou_predictions": "iou_scores",
}])
def test_point_decoder_click_lands_on_the_blob(tmp_path, names):
    adapter = open_adapter(build_wkentaro_v06(tmp_path, point_names=names))
    emb = adapter.encode(RGB)
    assert adapter.prompt_decoder.accepts_mask_input
    assert adapter.concept_detector.max_exemplars == 16
    click = MID.centre_xy(SHAPE, adapter.input_size)
    cand = adapter.prompt_decoder.predict_masks(emb, click[None], np.array([1]))
    assert cand.logits.shape == (3, 24, 24) and not cand.single_mask_first
    best = cand.logits[int(np.argmax(cand.iou))] > 0
    size = best.shape[-1]
    assert best[MID.centre_rc(size, SHAPE)]
    assert not any(best[b.centre_rc(size, SHAPE)] for b in INSTANCES if b is not MID)
    held = adapter.prompt_decoder.predict_masks(emb, click[None], np.array([1]),
                                 mask_input=np.full((24, 24), -10.0, np.float32))
    assert not (held.logits > 0).any()  # the mask prompt reached the graph


def test_point_decoder_with_unknown_names_is_refused(tmp_path):
    build_wkentaro_v06(tmp_path, point_names={"point_labels": "clicks_kind"})
    with pytest.raises(LayoutMismatchError, match="clicks_kind") as info:
        open_adapter(tmp_path)
    assert "point_labels" in str(info.value)


@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_autognosi_bit_order_is_decided_once(tmp_path, monkeypatch, bitorder):
    adapter = open_adapter(build_autognosi(tmp_path, bitorder=bitorder))
    emb = adapter.encode(RGB)
    calls = []
    original = autognosi_module.bit_order_errors
    monkeypatch.setattr(autognosi_module, "bit_order_errors",
                        lambda *a: calls.append(1) or original(*a))
    det = adapter.concept_detector.detect(emb, words(adapter))
    assert adapter.concepts.bit_order == bitorder and det.mask_kind == "binary"
    check_instances(det, INSTANCES, SHAPE)
    check_instances(adapter.concept_detector.detect(emb, words(adapter, TOKEN_BRIGHT)),
                    INSTANCES[:2], SHAPE)
    assert len(calls) == 1
    adapter.concepts.bit_order = "little" if bitorder == "big" else "big"  # force the wrong
    with pytest.raises(AssertionError):
        check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)


def test_autognosi_text_clicks_and_boxes(tmp_path, monkeypatch):
    adapter = open_adapter(build_autognosi(tmp_path))
    calls = record_runs(monkeypatch, adapter.sessions["text_encoder"])
    emb = adapter.encode(RGB)
    words(adapter)
    feeds = calls[0][1]
    assert (feeds["input_ids"][0, 3:] == EOT).all() and feeds["attention_mask"].sum() == 3
    with pytest.raises(CapabilityError):
        adapter.concept_detector.detect(emb, words(adapter), MID.box_cxcywh(SHAPE)[None])
    click = MID.centre_xy(SHAPE, adapter.input_size)
    cand = adapter.prompt_decoder.predict_masks(emb, click[None], np.array([1]))
    assert cand.single_mask_first and cand.logits.shape == (4, 24, 24)
    x0, y0, x1, y1 = BRIGHT.box_xyxy(SHAPE) * np.tile(adapter.input_size[::-1], 2)
    boxed = adapter.prompt_decoder.predict_masks(emb, np.array([[x0, y0], [x1, y1]]),
                                                 np.array([2, 3]))
    for c in (cand, boxed):
        best = c.logits[1 + int(np.argmax(c.iou[1:]))] > 0
        blob = MID if c is cand else BRIGHT
        assert best[blob.centre_rc(24, SHAPE)] and c.object_score > 0
        assert not any(best[b.centre_rc(24, SHAPE)] for b in INSTANCES if b is not blob)


def test_comicapp_fp16_encoder_feeds_three_of_four_levels(tmp_path, monkeypatch):
    adapter = open_adapter(build_comicapp(tmp_path))
    calls = record_runs(monkeypatch, adapter.encoder)
    emb = adapter.encode(RGB)
    (asked, feeds), = calls
    assert asked == ["image_features_0", "image_features_1", "image_features_2"]
    assert next(iter(feeds.values())).dtype == np.float16
    assert all(v.dtype == np.float32 for v in emb.features.values())
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)


def test_comicapp_without_box_graph_and_with_box_graph_only(tmp_path):
    no_box = open_adapter(build_comicapp(tmp_path / "a", box_graph=False))
    emb = no_box.encode(RGB)
    with pytest.raises(CapabilityError):
        no_box.concept_detector.detect(emb, words(no_box), MID.box_cxcywh(SHAPE)[None])
    only_box = build_comicapp(tmp_path / "b")
    (only_box / "sam31_prompt_side.onnx").unlink()
    adapter = open_adapter(only_box)
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)
    check_instances(adapter.concept_detector.detect(emb, words(adapter),
                                                    MID.box_cxcywh(SHAPE, 0.6)[None]),
                    [MID], SHAPE)


def test_comicapp_unknown_prompt_input_is_named(tmp_path):
    folder = build_comicapp(tmp_path)
    build_prompt(folder / "sam31_prompt_side.onnx", SMALL, with_boxes=False,
                 extra_input="style_scale")
    with pytest.raises(LayoutMismatchError, match="style_scale") as info:
        open_adapter(folder)
    assert "text_features" in str(info.value) and "fpn_feat_0" in str(info.value)


@pytest.mark.parametrize("build", [build_wkentaro_v03, build_samexporter])
def test_full_geometry(tmp_path, build):
    adapter = open_adapter(build(tmp_path, FULL))
    assert adapter.input_size == (1008, 1008) and adapter.mask_size == (288, 288)
    emb = adapter.encode(RGB)
    assert emb.features["backbone_fpn_0"].shape[-2:] == (288, 288)
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)
    one = adapter.concept_detector.detect(emb, words(adapter), MID.box_cxcywh(SHAPE, 0.6)[None])
    check_instances(one, [MID], SHAPE)


@pytest.mark.parametrize("geometry", [SMALL, FULL], ids=["small", "full"])
def test_comicapp_text_graph_is_the_side_graph_even_when_text_features_are_four_wide(
        tmp_path, geometry):
    # Small graphs carry 4-wide text features [1, L, 4]: shaped like boxes. The box role must
    # still be the graph that takes boxes, and text must go to the side graph.
    adapter = open_adapter(build_comicapp(tmp_path, geometry))
    assert adapter.prompts["side"][0].path.name == "sam31_prompt_side.onnx"
    assert adapter.prompts["box"][0].path.name == "sam31_prompt_box.onnx"
    roles = adapter.assumptions()
    assert "sam31_prompt_side.onnx" in roles["side graph roles"][1]
    assert "box_coords" not in roles["side graph roles"][0]


def test_wkentaro_v02_answers_in_original_pixels(tmp_path, wk03):
    from napari_sam3_onnx.testing.rusen import build_wkentaro_v02

    adapter = open_adapter(build_wkentaro_v02(tmp_path))
    assert adapter.layout == "wkentaro-v0.2"
    assert {c.value for c in adapter.capabilities} == {"encode", "text", "exemplars", "boxes"}
    emb = adapter.encode(RGB)
    det = adapter.concept_detector.detect(emb, words(adapter))
    assert det.masks.shape == (len(INSTANCES), *SHAPE)  # the original size, not 24 x 24
    assert det.mask_kind == "binary" and det.min_score == 0.5
    # the same detections as v0.3 (normalised boxes), on an asymmetric image
    ref = wk03.concept_detector.detect(wk03.encode(RGB), words(wk03))
    np.testing.assert_allclose(det.boxes, ref.boxes, atol=1e-6)
    np.testing.assert_allclose(det.scores, ref.scores, rtol=1e-6)
    for blob in INSTANCES:  # each mask holds its blob's centre pixel and no other's
        i = int(np.argmin(np.abs(det.boxes - blob.box_xyxy(SHAPE)).max(axis=1)))
        centres = {b.name: ((b.r0 + b.r1) // 2, (b.c0 + b.c1) // 2) for b in INSTANCES}
        assert [n for n, rc in centres.items() if det.masks[i][rc]] == [blob.name]
    boxed = adapter.concept_detector.detect(emb, words(adapter), MID.box_cxcywh(SHAPE, 0.6)[None])
    assert len(boxed) == 1 and np.abs(boxed.boxes[0] - MID.box_xyxy(SHAPE)).max() < 0.06
