"""Pagarcia tracker bundle and jax-image-tools video: recognition, errors, clicks and boxes."""

import shutil

import numpy as np
import onnx
import pytest

from _tracker_helpers import (
    BLOBS,
    BUILDERS,
    SHAPE,
    best_mask,
    iou,
    level0,
    rgb,
    spy_feeds,
    top_feature,
    xy,
)
from conftest import blob_image, disc
from napari_sam3_onnx.models.adapters import JaxVideoAdapter, PagarciaTrackerAdapter
from napari_sam3_onnx.models.adapters._memory import CONDITIONED
from napari_sam3_onnx.models.adapters._tracker_util import order_prompt
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import (
    CapabilityError,
    LayoutMismatchError,
    ModelFileMissingError,
)
from napari_sam3_onnx.testing import memory as sem
from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.pagarcia import build_pagarcia


@pytest.fixture(scope="module", params=list(BUILDERS))
def adapter(request, tmp_path_factory):
    return open_adapter(BUILDERS[request.param](tmp_path_factory.mktemp(request.param)))


# ---- recognition and errors ----------------------------------------------------------------
@pytest.mark.parametrize(("name", "cls"), [("pagarcia", PagarciaTrackerAdapter),
                                           ("jax", JaxVideoAdapter)])
def test_recognised_with_memory(name, cls, tmp_path):
    a = open_adapter(BUILDERS[name](tmp_path))
    assert type(a) is cls and a.has(Capability.MEMORY) and a.has(Capability.BOXES)
    geo = sem.MEMORY_SMALL
    assert a.input_size == (geo.input_size,) * 2 and a.mask_size == (geo.mask_size,) * 2
    assert a.memory_graphs.memory_settings.num_maskmem == 7


def test_pagarcia_graphs_found_by_names_not_file_names(tmp_path):
    src = build_pagarcia(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    for i, f in enumerate(sorted(src.iterdir())):
        keep = f.suffix != ".onnx"  # data file and npz keep their names
        shutil.copy(f, dst / (f.name if keep else f"g{i}.onnx"))
    a = open_adapter(dst)
    assert a.layout == "pagarcia-tracker" and a.has(Capability.MEMORY)
    assert a.prompt_decoder.accepts_mask_input
    settings = a.memory_graphs.memory_settings
    assert settings.max_memories == 2 and settings.max_pointers == 16


def test_pagarcia_variants_pair_graphs_and_constants(tmp_path):
    build_pagarcia(tmp_path, variant="_single", max_mem_frames=2)
    build_pagarcia(tmp_path, variant="_multi", max_mem_frames=4, no_mem_bias=0.25)
    a = open_adapter(tmp_path)  # the larger memory wins; its decoders and constants go with it
    assert a.memory_graphs.memory_settings.max_memories == 4 and a.no_mem_embed[0, 1, 0, 0] == 0.25
    assert a.constants_path.name == "video_constants_multi.npz"
    assert all(s.path.stem.endswith("_multi") for s in (*a.decoders.values(), a.memory_encoder))


def test_hf_pair_still_hf(tmp_path):
    assert open_adapter(build_hf_tracker(tmp_path)).layout == "hf-tracker"


@pytest.mark.parametrize("name", list(BUILDERS))
def test_without_memory_graphs_capability_is_absent(name, tmp_path):
    a = open_adapter(BUILDERS[name](tmp_path, memory=False))
    assert a.has(Capability.CLICKS) and not a.has(Capability.MEMORY)
    emb = a.encode(rgb(blob_image(SHAPE, BLOBS)))
    assert len(a.prompt_decoder.predict_masks(emb, xy(a, [[40, 65]]), [1]).iou) == 3
    with pytest.raises(CapabilityError, match="memory"):
        a.memory_graphs.memory_encode(emb, np.zeros(a.mask_size, np.float32), 1.0, True)


@pytest.mark.parametrize(("name", "drop", "other"), [
    ("pagarcia", "memory_encoder_single.onnx", "memory_encoder"),
    ("pagarcia", "memory_attention_single.onnx", "memory_attention"),
    ("jax", "memory_encoder.onnx", "memory_encoder"),
])
def test_half_memory_pair_names_the_missing_graph(name, drop, other, tmp_path):
    folder = BUILDERS[name](tmp_path)
    (folder / drop).unlink()
    with pytest.raises(ModelFileMissingError, match=other):
        open_adapter(folder)


@pytest.mark.parametrize(("name", "kwargs", "what"), [
    ("pagarcia", {"constants": False}, "video_constants_single.npz"),
    ("jax", {"constants": False}, "constants.json"),
])
def test_missing_constants_file(name, kwargs, what, tmp_path):
    with pytest.raises(ModelFileMissingError, match=what):
        open_adapter(BUILDERS[name](tmp_path, **kwargs))


def test_jax_renamed_output_is_named(tmp_path):
    folder = build_jax_video(tmp_path)
    model = onnx.load(folder / "mask_decoder.onnx")
    for node in model.graph.node:
        node.output[:] = ["iou" if o == "iou_scores" else o for o in node.output]
    next(o for o in model.graph.output if o.name == "iou_scores").name = "iou"
    onnx.save(model, folder / "mask_decoder.onnx")
    with pytest.raises(LayoutMismatchError, match=r"missing outputs \['iou_scores'\]"):
        open_adapter(folder)


# ---- image path ----------------------------------------------------------------------------
def test_encode_keeps_axes_and_normalisation(adapter):
    r, c, rad = 12, 70, 7  # far from the diagonal: a transposed or flipped image shows
    emb = adapter.encode(rgb(blob_image(SHAPE, ((r, c, rad),))))
    f0 = level0(emb)[0, 0]
    cells = f0.shape[0]
    u, v = (c + 0.5) / SHAPE[1], (r + 0.5) / SHAPE[0]  # normalised x, y of the blob centre
    at = lambda x, y: f0[int(y * cells), int(x * cells)]  # noqa: E731
    assert abs(at(u, v) - 200 / 255) < 0.03  # place and normalisation (mean/std) both right
    for x, y in ((v, u), (1 - u, v), (u, 1 - v)):  # transposed, flipped left-right / up-down
        assert at(x, y) < 0.05
    assert emb.image_shape == SHAPE and CONDITIONED not in emb.features


def test_click_on_a_blob_gives_that_blob(adapter):
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    for k, (r, c, rad) in enumerate(BLOBS):
        cands = adapter.prompt_decoder.predict_masks(emb, xy(adapter, [[r, c]]), [1])
        assert cands.logits.shape == (3, *adapter.mask_size) and cands.object_score > 0
        mask = best_mask(cands)
        assert iou(mask, disc(SHAPE, r, c, rad)) > 0.7
        r2, c2, rad2 = BLOBS[1 - k]
        assert not (mask & disc(SHAPE, r2, c2, rad2 + 1)).any()
        assert cands.extras["object_pointer"].shape == (top_feature(emb).shape[1],)


def test_box_prompt_and_box_corners_go_first(adapter, monkeypatch):
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    r, c, rad = BLOBS[1]
    box = xy(adapter, [[r - rad - 2, c - rad - 2], [r + rad + 2, c + rad + 2]])
    cands = adapter.prompt_decoder.predict_masks(emb, box, [2, 3])
    assert iou(best_mask(cands), disc(SHAPE, r, c, rad)) > 0.7
    click = xy(adapter, [[r, c]])
    seen = spy_feeds(adapter, monkeypatch)
    adapter.prompt_decoder.predict_masks(emb, np.concatenate([click, box]), [1, 2, 3])
    labels = next(v for k, v in seen[0].items() if k.endswith("labels"))
    points = next(v for k, v in seen[0].items() if k in ("point_coords", "input_points"))
    # the toy pagarcia decoders pad themselves (as the real ones); the toy jax one does not
    pad = [] if next(iter(adapter.padding.values())).graph_pads else [-1]
    assert labels.reshape(-1).tolist() == [2, 3, 1, *pad]
    np.testing.assert_array_equal(points.reshape(-1, 2)[:3], np.concatenate([box, click]))


def test_order_prompt_keeps_order_within_groups_and_drops_padding():
    pts = np.arange(10, dtype=np.float32).reshape(5, 2)
    p, lab = order_prompt(pts, [1, 3, 0, -1, 2])
    assert lab.tolist() == [3, 2, 1, 0] and p[:, 0].tolist() == [2, 8, 0, 4]


def _uniform_click(a, value=150):
    """Click at a mask-grid cell centre on a uniform image; returns (logit, brightness there)."""
    emb = a.encode(rgb(np.full(SHAPE, value, np.uint8)))
    lm, (h, w) = a.mask_size[0], a.input_size
    i, j = lm // 2, lm // 3
    point = np.array([[(j + 0.5) * w / lm, (i + 0.5) * h / lm]], np.float32)
    cands = a.prompt_decoder.predict_masks(emb, point, [1])
    return cands.logits[int(np.argmax(cands.iou)), i, j], level0(emb)[0, 0, i, j], emb


@pytest.mark.parametrize("name", list(BUILDERS))
def test_no_mem_embed_added_exactly_once(name, tmp_path):
    a = open_adapter(BUILDERS[name](tmp_path))
    bias = float(a.no_mem_embed[0, 1, 0, 0])
    assert bias != 0
    logit, bright, emb = _uniform_click(a)
    assert logit == pytest.approx(sem.GAIN * (bright + bias - sem.BRIGHT), abs=1e-4)
    assert not top_feature(emb)[0, 1].any()  # the embedding keeps the raw feature
    assert _uniform_click(a)[0] == pytest.approx(logit, abs=1e-6)  # no accumulation


def test_jax_no_mem_embed_switch(tmp_path, monkeypatch):
    a = open_adapter(build_jax_video(tmp_path / "absent", no_mem_embed=False))
    assert a.no_mem_embed is None
    logit, bright, _ = _uniform_click(a)
    assert logit == pytest.approx(sem.GAIN * (bright - sem.BRIGHT), abs=1e-4)
    monkeypatch.setattr(JaxVideoAdapter, "no_mem_embed_keys", ())
    b = open_adapter(build_jax_video(tmp_path / "present"))
    assert b.no_mem_embed is None and _uniform_click(b)[0] == pytest.approx(logit, abs=1e-4)


def test_pagarcia_multimask_vs_singlemask_and_mask_input(tmp_path):
    a = open_adapter(build_pagarcia(tmp_path / "all"))
    emb = a.encode(rgb(blob_image(SHAPE, BLOBS)))
    r, c, rad = BLOBS[1]
    one, two = xy(a, [[r, c]]), xy(a, [[r, c], [r + 2, c]])
    box = xy(a, [[r - rad, c - rad], [r + rad, c + rad]])
    runs = {k: s.runs for k, s in a.decoders.items()}
    assert len(a.prompt_decoder.predict_masks(emb, one, [1]).iou) == 3
    assert len(a.prompt_decoder.predict_masks(emb, two, [1, 1]).iou) == 1
    assert len(a.prompt_decoder.predict_masks(emb, box, [2,
                                                         3]).iou) == 1  # a box counts as two points
    low = np.full(a.mask_size, -32.0, np.float32)
    assert (a.prompt_decoder.predict_masks(emb, one, [1], mask_input=low).logits <= 0).all()
    assert len(a.prompt_decoder.predict_masks(emb, two, [1, 1], mask_input=low).iou) == 1
    done = {k: s.runs - runs[k] for k, s in a.decoders.items()}
    assert done == {"decoder_multi": 1, "decoder_single": 2, "decoder_mask_multi": 1,
                    "decoder_mask_single": 1}
    only = open_adapter(build_pagarcia(tmp_path / "multi", decoders=("multi",)))
    assert not only.prompt_decoder.accepts_mask_input
    assert len(only.prompt_decoder.predict_masks(emb, two, [1, 1]).iou) == 3
    with pytest.raises(ValueError, match="mask"):
        only.prompt_decoder.predict_masks(emb, one, [1], mask_input=low)


def test_jax_is_multimask_only(tmp_path):
    a = open_adapter(build_jax_video(tmp_path))
    emb = a.encode(rgb(blob_image(SHAPE, BLOBS)))
    assert not a.prompt_decoder.accepts_mask_input
    assert len(a.prompt_decoder.predict_masks(emb, xy(a, [[40, 65], [42, 65]]), [1, 1]).iou) == 3
    with pytest.raises(ValueError, match="mask_input"):
        a.prompt_decoder.predict_masks(emb, xy(a, [[40, 65]]), [1],
                                       np.zeros(a.mask_size, np.float32))
