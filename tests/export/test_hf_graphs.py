"""The plugin on graphs exported from ``transformers``' SAM 3 models under the published names.

Export environment only (``torch`` and ``transformers``); run by ``scripts/test_export.sh``.
Small random-weight ``Sam3TrackerModel`` / ``Sam3Model`` (:mod:`napari_sam3_onnx.export.
hf_graphs`) exported as the onnx-community tracker pair and the danilobukvic / transformers.js
text-detector triple; the plugin's adapters, through the engine where a workflow exists, are
compared with transformers' own forward on the same pixels.

Where an adapter still differs from transformers, the test says what differs and is marked
``xfail(strict=True)``: it turns into a failure (to be un-marked) the day the adapter makes it
pass.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.export, pytest.mark.timeout(900)]

SHAPE = (150, 260)  # rows x cols: not square, not the model's 224
PHRASE = [49406, 320, 1929, 49407]  # CLIP BPE ids with start / end tokens


def _image(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = (rng.random((*SHAPE, 3)) * 255).astype(np.uint8)
    img[40:110, 60:200] //= 3  # some structure
    return img


def _pixels(img: np.ndarray, size: int):
    from napari_sam3_onnx.export.hf_graphs import pixels
    from napari_sam3_onnx.models.imageops import resize_rgb_uint8

    return pixels(torch.from_numpy(resize_rgb_uint8(img, (size, size))))


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


# ---- hf-tracker: clicks and boxes ---------------------------------------------------------
@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    from napari_sam3_onnx.export import hf_graphs as H
    from napari_sam3_onnx.models.bundle import open_adapter

    model = H.build_tracker(seed=0)
    folder = H.export_tracker(tmp_path_factory.mktemp("hf_tracker"), model)
    adapter = open_adapter(folder)
    img = _image(1)
    return model, adapter, img, adapter.encode(img)


def _tracker_ref(model, emb, **prompt):
    from napari_sam3_onnx.export.hf_graphs import EMBEDDINGS

    feats = [torch.from_numpy(emb.features[k]) for k in EMBEDDINGS]
    with torch.no_grad():
        out = model(image_embeddings=feats, multimask_output=True, **prompt)
    return (out.pred_masks[0, 0].numpy(), out.iou_scores.reshape(-1).numpy(),
            float(out.object_score_logits.reshape(-1)[0]))


def test_tracker_graphs_open_as_hf_tracker_and_encode_like_transformers(tracker):
    from napari_sam3_onnx.export.hf_graphs import EMBEDDINGS, SIZE
    from napari_sam3_onnx.models.base import Capability

    model, adapter, img, emb = tracker
    assert adapter.layout == "hf-tracker"
    assert {Capability.CLICKS, Capability.BOXES} <= adapter.capabilities
    with torch.no_grad():
        ref = model.get_image_embeddings(_pixels(img, SIZE))
    for name, want in zip(EMBEDDINGS, ref, strict=True):
        np.testing.assert_allclose(emb.features[name], want.numpy(), atol=1e-4, rtol=1e-4)


CLICKS = {  # name: (points (row, col), labels, box (r0, c0, r1, c1) or None)
    "one click": ([[50.0, 190.0]], [1], None),
    "click and negative": ([[50.0, 190.0], [120.0, 40.0]], [1, 0], None),
    "box and click": ([[75.0, 130.0]], [1], [20.0, 60.0, 130.0, 230.0]),
}


@pytest.mark.parametrize("case", list(CLICKS))
def test_tracker_prompts_give_what_transformers_gives(case, tracker):
    """Candidates, IoU and object score per prompt, and the slice mask through the engine."""
    import torch.nn.functional as F

    from napari_sam3_onnx.engine.interactive import Prompt, prepare_prompt, segment

    model, adapter, _, emb = tracker
    points, labels, box = CLICKS[case]
    p = Prompt.clicks(points, labels, box)
    xy, labs = prepare_prompt(p, emb.image_shape, emb.input_size)
    clicks = labs < 2
    prompt = {"input_points": torch.from_numpy(xy[clicks][None, None]),
              "input_labels": torch.from_numpy(labs[clicks][None, None])}
    if box is not None:
        prompt["input_boxes"] = torch.from_numpy(xy[~clicks].reshape(1, 1, 4))
    low, iou, obj = _tracker_ref(model, emb, **prompt)
    got = adapter.prompt_decoder.predict_masks(emb, xy, labs)
    np.testing.assert_allclose(got.logits, low, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got.iou, iou, atol=1e-5)
    assert abs(got.object_score - obj) < 1e-4
    mask = segment(adapter, emb, p, fill_hole_area=0).mask  # transformers fills no holes
    best = int(np.argmax(iou))  # the decoder is multimask only: SAM's best-IoU candidate
    ref = F.interpolate(torch.from_numpy(low[best][None, None]), size=SHAPE, mode="bilinear",
                        align_corners=False)[0, 0].numpy() > 0
    assert obj > 0 and ref.any()  # else SAM 3 empties the mask and nothing is compared
    assert _iou(mask, ref) > 0.98


def test_tracker_box_alone_gives_what_transformers_gives(tracker):
    from napari_sam3_onnx.engine.interactive import Prompt, prepare_prompt

    model, adapter, _, emb = tracker
    p = Prompt.clicks(np.zeros((0, 2)), np.zeros(0, np.int64), [20.0, 60.0, 130.0, 230.0])
    xy, labs = prepare_prompt(p, emb.image_shape, emb.input_size)
    low, iou, _ = _tracker_ref(model, emb, input_boxes=torch.from_numpy(xy.reshape(1, 1, 4)))
    got = adapter.prompt_decoder.predict_masks(emb, xy, labs)
    np.testing.assert_allclose(got.logits, low, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got.iou, iou, atol=1e-6)


def test_the_graph_takes_a_box_without_points_as_transformers_does(tracker):
    """What the adapter feeds for a box alone (zero points): checked on this graph."""
    from napari_sam3_onnx.export.hf_graphs import EMBEDDINGS

    model, adapter, _, emb = tracker
    box = np.array([[[40.0, 30.0, 190.0, 200.0]]], np.float32)
    out = adapter.decoder.run(["pred_masks", "iou_scores"], {
        "input_points": np.zeros((1, 1, 0, 2), np.float32),
        "input_labels": np.zeros((1, 1, 0), np.int64), "input_boxes": box,
        **{k: emb.features[k] for k in EMBEDDINGS}})
    low, iou, _ = _tracker_ref(model, emb, input_boxes=torch.from_numpy(box))
    np.testing.assert_allclose(out["pred_masks"][0, 0], low, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(out["iou_scores"].reshape(-1), iou, atol=1e-5)


# ---- hf-detector (danilobukvic / transformers.js): text -------------------------------------
@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    from napari_sam3_onnx.export import hf_graphs as H

    model = H.build_detector(seed=0)
    folder = H.export_detector(tmp_path_factory.mktemp("hf_detector"), model)
    img = _image(2)
    ids, mask = H.tokens(PHRASE)
    with torch.no_grad():
        ref = model(pixel_values=_pixels(img, H.SIZE), input_ids=ids, attention_mask=mask)
    return folder, img, ref


def test_detector_graphs_run_as_transformers_does(detector):
    """The exported triple, chained by hand with onnxruntime, equals transformers' forward.

    Checks the export itself, so a failure of the adapter tests below is the adapter's.
    """
    import onnxruntime as ort

    from napari_sam3_onnx.export import hf_graphs as H

    folder, img, ref = detector

    def run(name, feeds):
        sess = ort.InferenceSession(str(folder / name), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds),
                        strict=True))

    vis = run("vision_encoder.onnx", {"pixel_values": _pixels(img, H.SIZE).numpy()})
    ids, mask = (t.numpy() for t in H.tokens(PHRASE))
    text = run("text_encoder.onnx", {"input_ids": ids, "attention_mask": mask})
    out = run("decoder.onnx", {**{k: vis[k] for k in (*H.FPN[:3], H.FPN_POS[2])},
                               "text_features": text["text_features"], "attention_mask": mask})
    np.testing.assert_allclose(out["pred_logits"], ref.pred_logits.numpy(), atol=1e-3)
    np.testing.assert_allclose(out["pred_boxes"], ref.pred_boxes.numpy(), atol=1e-4)
    np.testing.assert_allclose(out["pred_masks"], ref.pred_masks.numpy(), atol=1e-2, rtol=1e-3)


def test_detector_bundle_opens_with_text(detector):
    from napari_sam3_onnx.models.base import Capability
    from napari_sam3_onnx.models.bundle import open_adapter

    adapter = open_adapter(detector[0])
    assert Capability.TEXT in adapter.capabilities


def test_detections_give_what_transformers_gives(detector):
    """Every query: score sigmoid(logit) (the graph has no presence), box, mask logits."""
    from napari_sam3_onnx.models.bundle import open_adapter

    folder, img, ref = detector
    adapter = open_adapter(folder)
    det = adapter.concept_detector
    found = det.detect(adapter.encode(img), det.encode_text(PHRASE))
    want = 1 / (1 + np.exp(-ref.pred_logits[0].numpy()))
    order, ref_order = np.argsort(-found.scores), np.argsort(-want)
    np.testing.assert_allclose(found.scores[order], want[ref_order], atol=1e-4)
    np.testing.assert_allclose(found.boxes[order], ref.pred_boxes[0].numpy()[ref_order],
                               atol=1e-4)
    assert found.mask_kind == "logits"
    np.testing.assert_allclose(found.masks[order], ref.pred_masks[0].numpy()[ref_order],
                               atol=1e-2, rtol=1e-3)
