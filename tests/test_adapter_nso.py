"""The nso-sam3 adapter (this project's own export) on toy graphs with the exported names.

The parity of the real export against PyTorch is tests/export (export environment only); these
tests hold the adapter's plumbing in the plugin's own environment.
"""

import numpy as np
import pytest

from _tracker_helpers import BLOBS, SHAPE, iou, rgb, xy
from conftest import blob_image, disc
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import Prompt, segment
from napari_sam3_onnx.engine.tracking.propagation import propagate
from napari_sam3_onnx.engine.tracking.types import Seed
from napari_sam3_onnx.models.adapters import ADAPTERS, NsoAdapter
from napari_sam3_onnx.models.adapters._memory import CONDITIONED
from napari_sam3_onnx.models.base import Capability as C
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import ModelFileMissingError
from napari_sam3_onnx.testing import memory as sem
from napari_sam3_onnx.testing.nso import build_nso


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_nso(tmp_path_factory.mktemp("nso"))


@pytest.fixture(scope="module")
def adapter(bundle):
    return open_adapter(bundle)


def spy(session, monkeypatch):
    seen = []
    run = session.run
    monkeypatch.setattr(session, "run", lambda names, feeds: seen.append(feeds)
                        or run(names, feeds))
    return seen


def test_recognised_first_with_every_capability(adapter):
    assert ADAPTERS[0] is NsoAdapter
    assert adapter.layout == "nso-sam3"
    assert adapter.capabilities == frozenset(C)
    assert adapter.input_size == (112, 112) and adapter.mask_size == (32, 32)
    detector = adapter.concept_detector
    assert detector.max_exemplars == 4 and detector.context_length == 32
    assert adapter.prompt_decoder.accepts_mask_input
    s = adapter.memory_graphs.memory_settings
    assert (s.num_maskmem, s.max_obj_ptrs, s.max_memories, s.max_pointers) == (7, 16, None, None)


@pytest.mark.parametrize(("concepts", "memory", "missing"),
                         [(False, True, {C.TEXT, C.EXEMPLARS}), (True, False, {C.MEMORY})])
def test_capabilities_follow_the_graphs(tmp_path, concepts, memory, missing):
    a = open_adapter(build_nso(tmp_path, concepts=concepts, memory=memory))
    assert a.layout == "nso-sam3" and a.capabilities == frozenset(C) - missing


def test_missing_constants_is_a_clear_error(tmp_path):
    with pytest.raises(ModelFileMissingError, match="no_mem_embed"):
        open_adapter(build_nso(tmp_path, constants=False))


def test_click_adds_no_mem_embed_once_and_picks_upstreams_pointer(adapter, monkeypatch):
    seen = spy(adapter.decoder, monkeypatch)
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    one = adapter.prompt_decoder.predict_masks(emb, xy(adapter, [BLOBS[1][:2]]), np.array([1]))
    top = seen[-1]["image_embed"]
    np.testing.assert_allclose(top[0, 1], sem.NO_MEM_BIAS)  # raw channel 1 is 0 in the toy
    assert one.single_mask_first and one.logits.shape == (4, 32, 32)
    # <= 1 point: the best multimask token's pointer (token 2); toy pointer = score + token
    assert one.extras["object_pointer"][0] == pytest.approx(one.object_score + 2)
    two = adapter.prompt_decoder.predict_masks(emb, xy(adapter, [BLOBS[1][:2], (5, 5)]),
                                               np.array([1, 0]))
    assert two.extras["object_pointer"][0] == pytest.approx(two.object_score + 0)
    assert seen[-1]["has_mask_input"].tolist() == [0.0]


def test_segment_a_blob_and_refine_with_its_mask(adapter, monkeypatch):
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    first = segment(adapter, emb, Prompt.clicks([BLOBS[1][:2]]))
    assert iou(first.mask, disc(SHAPE, *BLOBS[1])) > 0.6
    seen = spy(adapter.decoder, monkeypatch)
    segment(adapter, emb, Prompt.clicks([BLOBS[1][:2]], mask_logits=first.low_res_logits))
    assert seen[-1]["has_mask_input"].tolist() == [1.0]
    assert seen[-1]["mask_input"].shape == (1, 1, 32, 32)


def test_tracked_slice_gets_sams_empty_prompt(adapter, monkeypatch):
    seen = spy(adapter.decoder, monkeypatch)
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    cond = {**emb.features, CONDITIONED: emb.features["trk_feat_2"] * 0}
    adapter.prompt_decoder.predict_masks(type(emb)(cond, emb.input_size, emb.image_shape),
                          np.zeros((0, 2), np.float32), np.zeros(0, np.int64))
    assert seen[-1]["point_labels"].tolist() == [[-1]]
    assert not seen[-1]["image_embed"].any()  # the conditioned feature, no no_mem_embed


def test_text_only_search_masks_every_slot(adapter, monkeypatch):
    seen = spy(adapter.detector, monkeypatch)
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    detector = adapter.concept_detector
    det = detector.detect(emb, detector.encode_text([49406, 320, 49407]))
    feeds = seen[-1]
    assert feeds["exemplar_padding"].all() and feeds["exemplar_padding"].shape == (1, 4)
    assert not feeds["exemplar_boxes"].any()  # never a whole-image positive box
    assert det.mask_kind == "logits" and det.masks.shape[1:] == (32, 32)
    box = np.array([[0.5, 0.5, 0.2, 0.2]], np.float32)
    adapter.concept_detector.detect(emb, adapter.concept_detector.encode_text([49406, 320, 49407]),
                                    box, np.array([1]))
    assert seen[-1]["exemplar_padding"].tolist() == [[False, True, True, True]]
    with pytest.raises(ValueError, match="at most 4"):
        adapter.concept_detector.detect(emb, adapter.concept_detector.encode_text([49406, 49407]),
                                        np.repeat(box, 5, 0))


def test_memory_attend_feeds_dynamic_banks_and_normalised_positions(adapter, monkeypatch):
    seen = spy(adapter.memory_attention, monkeypatch)
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    logits = segment(adapter, emb, Prompt.clicks([BLOBS[1][:2]])).low_res_logits
    frames = [adapter.memory_graphs.memory_encode(emb, logits, 1.0, k == 0) for k in range(3)]
    assert frames[0].features.shape == (4, 8, 8) and frames[0].pos_enc.shape == (4, 8, 8)
    out = adapter.memory_graphs.memory_attend(emb, frames, [6, 1, 0], np.ones((2, 8), np.float32),
                                              [3.0, 1.0])
    feeds = seen[-1]
    assert feeds["memory_feats"].shape == (3, 4, 8, 8)
    assert feeds["memory_rows"].tolist() == [6, 1, 0]
    np.testing.assert_allclose(feeds["pointer_tpos"], [3 / 15, 1 / 15])
    assert out.features[CONDITIONED].shape == (1, 8, 8, 8)
    adapter.memory_graphs.memory_attend(emb, frames[:1], [6], np.zeros((0, 8), np.float32),
                                        [])  # no pointer
    assert seen[-1]["pointers"].shape == (0, 8)


def test_propagation_follows_a_drifting_blob(adapter):
    z = 5
    stack = np.stack([rgb(blob_image(SHAPE, ((30, 30 + 4 * k, 8),))) for k in range(z)])
    refs = [SliceRef(stack, (k,), rgb=True, source="nso") for k in range(z)]
    res = propagate(adapter, SliceEncoder(adapter), refs, {1: Seed.clicks(2, [(30, 38)])},
                    stop_after_absent=None)
    assert res.method == "memory"
    for k in range(z):
        assert iou(res.objects[1].outputs[k].mask, disc(SHAPE, 30, 30 + 4 * k, 8)) > 0.5, k


def test_fp16_storage_halves_large_weights_and_keeps_fp32_compute(tmp_path):
    import onnx
    import onnxruntime as ort

    from napari_sam3_onnx.export.precision import fp16_storage
    from napari_sam3_onnx.testing.builder import GraphBuilder

    rng = np.random.default_rng(0)
    w = rng.normal(size=(64, 128)).astype(np.float32)
    b = GraphBuilder("fp16_probe")
    x = b.input("x", "float32", [1, 64])
    b.output(b.Add(b.MatMul(x, b.const(w)), b.const(np.ones(128, np.float32))), "y", "float32",
             [1, 128])
    b.save(tmp_path / "fp32.onnx")
    model = fp16_storage(onnx.load(tmp_path / "fp32.onnx"))
    onnx.save(model, tmp_path / "fp16.onnx")
    kinds = {i.data_type for i in model.graph.initializer if np.prod(i.dims) >= 4096}
    assert kinds == {onnx.TensorProto.FLOAT16}  # the large weight; the small bias stays fp32
    assert (tmp_path / "fp16.onnx").stat().st_size < 0.6 * (tmp_path / "fp32.onnx").stat().st_size
    feed = {"x": rng.normal(size=(1, 64)).astype(np.float32)}
    run = {n: ort.InferenceSession(tmp_path / f"{n}.onnx").run(None, feed)[0]
           for n in ("fp32", "fp16")}
    assert run["fp16"].dtype == np.float32
    np.testing.assert_allclose(run["fp16"], run["fp32"], rtol=2e-3, atol=2e-2)


def test_precision_comes_from_the_manifest(tmp_path):
    import json

    from napari_sam3_onnx.engine.store.keys import BundleTag
    from napari_sam3_onnx.testing.nso import build_nso

    fp32 = build_nso(tmp_path / "fp32", concepts=False)
    int8 = build_nso(tmp_path / "int8", concepts=False)
    meta = json.loads((int8 / "manifest.json").read_text())
    meta["precision"] = "int8 (dynamic) in image_encoder; fp32 elsewhere"
    (int8 / "manifest.json").write_text(json.dumps(meta))
    assert open_adapter(fp32).precision == "fp32"
    assert open_adapter(int8).precision.startswith("int8 (dynamic)")
    # the embedding store keys by the weight files: a variant's are other files (sizes)
    with open(int8 / "image_encoder.onnx", "ab") as f:
        f.write(b"\0" * 16)
    assert BundleTag.for_folder(fp32, "nso-sam3").weights != BundleTag.for_folder(
        int8, "nso-sam3").weights
