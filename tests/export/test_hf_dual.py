"""One vision pass for every head, on graphs exported from ``transformers``' ``Sam3VideoModel``.

Export environment only; run by ``scripts/test_export.sh``. A small random-weight
``Sam3VideoModel`` gives a dual encoder (one ViT, the detector's and the tracker's necks: the
``parodiniccolo/sam3-dual-webgpu`` / ``wW-Ww`` arrangement under the Hugging Face names), the
onnx-community tracker head and the danilobukvic text-detector heads, in one folder
(:func:`napari_sam3_onnx.export.hf_graphs.export_dual`).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.export, pytest.mark.timeout(900)]

SHAPE = (170, 240)  # rows x cols


@pytest.fixture(scope="module")
def video():
    from napari_sam3_onnx.export import hf_graphs as H

    return H.build_video(seed=0)


@pytest.fixture(scope="module")
def wwww(video, dual, tmp_path_factory):
    from napari_sam3_onnx.export import hf_graphs as H

    return H.export_wwww(tmp_path_factory.mktemp("wwww"), video, dual=dual[1])


@pytest.fixture(scope="module")
def dual(video, tmp_path_factory):
    from napari_sam3_onnx.export import hf_graphs as H
    from napari_sam3_onnx.models.imageops import resize_rgb_uint8

    folder = H.export_dual(tmp_path_factory.mktemp("dual"), video)
    rng = np.random.default_rng(4)
    img = (rng.random((*SHAPE, 3)) * 255).astype(np.uint8)
    px = H.pixels(torch.from_numpy(resize_rgb_uint8(img, (H.SIZE, H.SIZE))))
    return video, folder, img, px


def test_the_dual_encoder_gives_both_necks_of_one_vit_pass(dual):
    """ONNX dual encoder == transformers: detector FPN and tracker embeddings (+ no-memory)."""
    import onnxruntime as ort

    from napari_sam3_onnx.export import hf_graphs as H

    video, folder, _, px = dual
    sess = ort.InferenceSession(str(folder / "sam3_vision_dual.onnx"),
                                providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {
        "pixel_values": px.numpy()}), strict=True))
    with torch.no_grad():
        vis = video.detector_model.vision_encoder(px)
        feats, _ = video.get_vision_features_for_tracker(vis)
    for i, name in enumerate(H.FPN):
        np.testing.assert_allclose(got[name], vis.fpn_hidden_states[i].numpy(), atol=1e-4)
    no_mem = video.tracker_model.no_memory_embedding.detach().numpy().reshape(-1)
    for i, (name, size) in enumerate(zip(H.EMBEDDINGS, (4, 2, 1), strict=True)):
        want = feats[i].permute(1, 2, 0).reshape(1, -1, H.GRID * size, H.GRID * size).numpy()
        if i == 2:
            want = want + no_mem[None, :, None, None]
        np.testing.assert_allclose(got[name], want, atol=1e-4)


@pytest.mark.parametrize("layout", ["dual", "wwww"])
def test_clicks_give_what_the_video_model_gives(layout, dual, wwww):
    """A prompted slice: transformers' video tracker on the same embeddings, one click."""
    from napari_sam3_onnx.engine.interactive import Prompt, prepare_prompt
    from napari_sam3_onnx.export.hf_graphs import EMBEDDINGS
    from napari_sam3_onnx.models.base import Capability
    from napari_sam3_onnx.models.bundle import open_adapter

    video, folder, img, _ = dual
    adapter = open_adapter(folder if layout == "dual" else wwww)
    assert Capability.CLICKS in adapter.capabilities
    emb = adapter.encode(img)
    p = Prompt.clicks([[60.0, 170.0]], [1])
    xy, labs = prepare_prompt(p, emb.image_shape, emb.input_size)
    got = adapter.prompt_decoder.predict_masks(emb, xy, labs)
    with torch.no_grad():
        ref = video.tracker_model._single_frame_forward(
            image_embeddings=[torch.from_numpy(emb.features[k]) for k in EMBEDDINGS],
            input_points=torch.from_numpy(xy[None, None]),
            input_labels=torch.from_numpy(labs[None, None]), multimask_output=True)
    iou = ref.iou_scores.reshape(-1).numpy()
    np.testing.assert_allclose(got.iou, iou, atol=1e-5)
    assert abs(got.object_score - float(ref.object_score_logits.reshape(-1)[0])) < 1e-4
    best = int(np.argmax(got.iou))  # the video model keeps its best-IoU candidate, gated
    np.testing.assert_allclose(got.logits[best], ref.pred_masks.reshape(got.logits[best].shape),
                               atol=1e-4, rtol=1e-4)


def test_the_dual_folder_does_clicks_and_text_on_one_encode(dual):
    from napari_sam3_onnx.models.base import Capability
    from napari_sam3_onnx.models.bundle import open_adapter

    adapter = open_adapter(dual[1])
    assert {Capability.CLICKS, Capability.TEXT} <= adapter.capabilities




def test_the_wwww_folder_opens_with_text(wwww):
    from napari_sam3_onnx.models.base import Capability
    from napari_sam3_onnx.models.bundle import open_adapter

    assert Capability.TEXT in open_adapter(wwww).capabilities


def test_wwww_detections_give_what_transformers_gives(video, dual, wwww):
    """Every query: sigmoid(logit) x sigmoid(presence), the box, the mask logits."""
    from napari_sam3_onnx.export import hf_graphs as H
    from napari_sam3_onnx.models.bundle import open_adapter

    _, _, img, px = dual
    ids, mask = H.tokens([49406, 320, 1929, 49407])
    with torch.no_grad():
        ref = video.detector_model(pixel_values=px, input_ids=ids, attention_mask=mask)
    adapter = open_adapter(wwww)
    det = adapter.concept_detector
    found = det.detect(adapter.encode(img), det.encode_text([49406, 320, 1929, 49407]))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    want = sig(ref.pred_logits[0].numpy()) * sig(float(ref.presence_logits.reshape(-1)[0]))
    order, ref_order = np.argsort(-found.scores), np.argsort(-want)
    np.testing.assert_allclose(found.scores[order], want[ref_order], atol=1e-4)
    np.testing.assert_allclose(found.boxes[order], ref.pred_boxes[0].numpy()[ref_order],
                               atol=1e-4)
    np.testing.assert_allclose(found.masks[order], ref.pred_masks[0].numpy()[ref_order],
                               atol=1e-2, rtol=1e-3)


def test_the_wwww_detector_graph_runs_as_transformers_does(video, dual, wwww):
    """The exported vision + text + detector, chained by hand, equal transformers' forward."""
    import onnxruntime as ort

    from napari_sam3_onnx.export import hf_graphs as H

    _, _, _, px = dual

    def run(name, feeds):
        sess = ort.InferenceSession(str(wwww / name), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds),
                        strict=True))

    ids, mask = H.tokens([49406, 320, 1929, 49407])
    with torch.no_grad():
        ref = video.detector_model(pixel_values=px, input_ids=ids, attention_mask=mask)
    vis = run("vision.onnx", {"pixel_values": px.numpy()})
    text = run("text.onnx", {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    out = run("detector.onnx", {**{k: vis[k] for k in H.ww_feature_names()},
                                "text_features": text["text_features"],
                                "text_mask": mask.numpy().astype(bool)})
    np.testing.assert_allclose(out["pred_logits"], ref.pred_logits.numpy(), atol=1e-3)
    np.testing.assert_allclose(out["presence_logits"], ref.presence_logits.numpy(), atol=1e-3)
    np.testing.assert_allclose(out["pred_boxes"], ref.pred_boxes.numpy(), atol=1e-4)
