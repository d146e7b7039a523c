"""The plugin on a ``jax-video`` decoder exported by torch from Meta's SAM heads (issue 29 #7).

Export environment only (``torch`` and ``sam3``); run by ``scripts/test_export.sh``. The
decoder is Meta's ``_build_sam_heads`` / ``_forward_sam_heads`` with random weights behind the
layout's ``[1,1,N]`` boundary (:mod:`napari_sam3_onnx.export.tracker_heads`), so its graph pads
the prompt the way torch traces SAM's prompt encoder: a batch ``Gather``, ``+ 0.5``, a ``Concat``
with a constant zero point, and ``Gather`` -> ``Cast`` -> ``Concat`` with -1 for the labels.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("sam3")

pytestmark = [pytest.mark.export, pytest.mark.timeout(600)]

SHAPE = (150, 260)  # rows x cols: not square, not the model's 224
PROMPTS = [  # (points (row, col), labels, box (r0, c0, r1, c1) or None)
    ([[40.0, 200.0]], [1], None),
    ([[40.0, 200.0], [110.0, 60.0]], [1, 0], None),
    ([[75.0, 130.0]], [1], [20.0, 90.0, 130.0, 240.0]),
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from napari_sam3_onnx.export.tracker_heads import export_jax_video_bundle

    return export_jax_video_bundle(tmp_path_factory.mktemp("jaxheads"), seed=0, dynamo=False)


@pytest.fixture(scope="module")
def opened(exported):
    from napari_sam3_onnx.models.bundle import open_adapter

    adapter = open_adapter(exported[0])
    img = (np.random.default_rng(7).random((*SHAPE, 3)) * 255).astype(np.uint8)
    return adapter, adapter.encode(img)


def _torch_heads(decoder, emb, xy, labels):
    import torch

    f = {k: torch.from_numpy(v) for k, v in emb.features.items()}
    with torch.no_grad():
        low, _, iou, _, _, ptr, obj = decoder.heads(
            f["feats0"], f["feats1"], f["feats2"], torch.from_numpy(xy[None]),
            torch.from_numpy(labels[None].astype(np.int32)))
    return low[0].numpy(), iou[0].numpy(), ptr[0].numpy(), float(obj.reshape(-1)[0])


def test_the_graph_is_read_as_padding_itself(exported, opened, capsys):
    from napari_sam3_onnx.cli import main

    adapter, _ = opened
    assert adapter.layout == "jax-video"
    assert [(d.graph_pads, d.source) for d in adapter.padding.values()] == [
        (True, "graph mask_decoder.onnx")]
    assert main(["inspect", str(exported[0])]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.strip().startswith("padding"))
    assert "graph pads itself" in line and "[graph mask_decoder.onnx]" in line, line


@pytest.mark.parametrize("prompt", range(len(PROMPTS)))
def test_clicks_give_what_pytorch_gives(prompt, exported, opened):
    """Candidates, IoU, pointer and the slice mask equal Meta's heads on the same prompt."""
    import torch
    import torch.nn.functional as F

    from napari_sam3_onnx.engine.interactive import Prompt, prepare_prompt, segment

    adapter, emb = opened
    points, labels, box = PROMPTS[prompt]
    p = Prompt.clicks(points, labels, box)
    xy, labs = prepare_prompt(p, emb.image_shape, emb.input_size)
    got = adapter.prompt_decoder.predict_masks(emb, xy, labs)
    low, iou, ptr, obj = _torch_heads(exported[1], emb, xy, labs)
    np.testing.assert_allclose(got.logits, low, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got.iou, iou, atol=1e-4)
    np.testing.assert_allclose(got.extras["object_pointer"], ptr, atol=1e-3)
    assert abs(got.object_score - obj) < 1e-3
    assert obj > 0 and low.min() > -100 and np.ptp(low) > 0.05  # real masks, not SAM's blank
    mask = segment(adapter, emb, p, fill_hole_area=0).mask  # the reference fills no holes
    best = int(np.argmax(iou))
    ref = F.interpolate(torch.from_numpy(low[best][None, None]), size=SHAPE, mode="bilinear",
                        align_corners=False)[0, 0].numpy() > 0
    inter, union = np.logical_and(mask, ref).sum(), np.logical_or(mask, ref).sum()
    assert union == 0 or inter / union > 0.98, inter / union
