"""Conventions the adapters learn from a bundle: pointer temporal encoding, decoder padding."""

import json

import numpy as np
import pytest

from _tracker_helpers import SHAPE, best_mask, iou, rgb, xy
from conftest import blob_image, disc
from napari_sam3_onnx.models.adapters._padding import decide_padding
from napari_sam3_onnx.models.adapters._pointer_pos import ZEROS, sine_pe
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import LayoutMismatchError
from napari_sam3_onnx.testing import memory as sem
from napari_sam3_onnx.testing.autognosi import build_autognosi
from napari_sam3_onnx.testing.jax_video import (
    build_jax_video,
    graph_pointer_rows,
    pointer_projection,
)
from napari_sam3_onnx.testing.nso import build_nso
from napari_sam3_onnx.testing.pagarcia import build_pagarcia
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v06

BLOBS = ((18, 24, 7), (40, 62, 8))


def test_sine_pe_matches_upstream_formula_by_hand():
    pe = sine_pe(np.array([0.0, 1.0]), 8)
    # w = 10000 ** (2 * (i // 2) / 4) for i = 0..3 -> 1, 1, 100, 100
    w = np.array([1.0, 1.0, 100.0, 100.0])
    np.testing.assert_allclose(pe[0], [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_allclose(pe[1], np.concatenate([np.sin(1 / w), np.cos(1 / w)]), rtol=1e-6)


def _attend_feeds(adapter, monkeypatch, offsets):
    """Run one memory_attend with two pointers; return the memory attention's feeds."""
    emb = adapter.encode(rgb(blob_image(SHAPE, BLOBS)))
    r, c, _ = BLOBS[0]
    cands = adapter.prompt_decoder.predict_masks(emb, xy(adapter, [[r, c]]), [1])
    k = int(np.argmax(cands.iou))
    memory = adapter.memory_graphs.memory_encode(emb, cands.logits[k], cands.object_score, True)
    seen = []
    run = adapter.memory_attention.run
    monkeypatch.setattr(adapter.memory_attention, "run",
                        lambda names, feeds: seen.append(feeds) or run(names, feeds))
    ptrs = np.stack([cands.extras["object_pointer"], -cands.extras["object_pointer"]])
    adapter.memory_graphs.memory_attend(emb, [memory], [6], ptrs, offsets)
    return seen[0]


@pytest.mark.parametrize("kind", ["constants", "underscore", "object"])
def test_jax_pointer_encoding_from_constants_is_sam3s_formula(kind, tmp_path, monkeypatch):
    a = open_adapter(build_jax_video(tmp_path, pointer_encoding=kind))
    assert not a.pointer_encoding.is_zeros and "constants.json" in a.pointer_encoding.source
    feeds = _attend_feeds(a, monkeypatch, [1.0, 3.0])
    c, cm = sem.MEMORY_SMALL.channels[2], sem.MEM_CHANNELS
    weight, bias = pointer_projection(cm, c)
    x = np.array([1.0, 3.0]) / 15.0  # offset / (max_ptrs - 1), max_obj_ptrs defaults to 16
    half = c // 2
    w = 10000.0 ** (2 * (np.arange(half) // 2) / half)
    pe = np.concatenate([np.sin(x[:, None] / w), np.cos(x[:, None] / w)], axis=1)
    want = np.repeat(pe @ weight.T + bias, c // cm, axis=0)[:, None, :]
    got = feeds["pointer_memory_position_embeddings"]
    assert got.shape == feeds["pointer_memory"].shape == (2 * c // cm, 1, cm)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.abs(got[0] - got[2]).max() > 1e-3  # the two pointers are told apart


def test_jax_pointer_encoding_from_graph(tmp_path, monkeypatch):
    a = open_adapter(build_jax_video(tmp_path, pointer_encoding="graph"))
    assert a.pointer_encoding.source == "pointer_tpos.onnx"
    feeds = _attend_feeds(a, monkeypatch, [2.0, 5.0])
    want = np.repeat(graph_pointer_rows(np.array([2.0, 5.0]) / 15.0, sem.MEM_CHANNELS),
                     sem.MEMORY_SMALL.channels[2] // sem.MEM_CHANNELS, axis=0)[:, None, :]
    np.testing.assert_allclose(feeds["pointer_memory_position_embeddings"], want, rtol=1e-6)


def test_jax_pointer_encoding_is_zeros_only_without_either(tmp_path, monkeypatch):
    a = open_adapter(build_jax_video(tmp_path))
    assert a.pointer_encoding.is_zeros and a.pointer_encoding.source == ZEROS
    assert a.assumptions()["pointer encoding"][0].startswith("zeros")
    feeds = _attend_feeds(a, monkeypatch, [1.0, 3.0])
    assert not feeds["pointer_memory_position_embeddings"].any()


def test_jax_pointer_projection_of_the_wrong_shape_is_refused(tmp_path):
    folder = build_jax_video(tmp_path, pointer_encoding="constants")
    consts = json.loads((folder / "constants.json").read_text())
    consts["obj_ptr_tpos_proj.bias"] = [0.0] * 3
    (folder / "constants.json").write_text(json.dumps(consts))
    with pytest.raises(LayoutMismatchError, match="obj_ptr_tpos_proj"):
        open_adapter(folder)


# ---- padding -----------------------------------------------------------------------------
def _build(layout, folder, pads):
    if layout == "jax":
        return build_jax_video(folder, memory=False, pads=pads)
    if layout == "pagarcia":
        return build_pagarcia(folder, memory=False, pads=pads)
    if layout == "nso":
        return build_nso(folder, concepts=False, memory=False, pads=pads)
    if layout == "wkentaro":
        return build_wkentaro_v06(folder, pads=pads)
    return build_autognosi(folder, pads=pads)


def _sessions(adapter):
    if hasattr(adapter, "decoders"):
        return list(adapter.decoders.values())
    if hasattr(adapter, "points"):
        return [adapter.points.session]
    if hasattr(adapter, "sessions"):
        return [adapter.sessions["prompt_decoder"]]
    return [adapter.decoder]


def _decisions(adapter):
    d = getattr(adapter, "padding", None) or adapter.points.padding
    return list(d.values()) if isinstance(d, dict) else [d]


def _click_feeds(adapter, monkeypatch, points_rc, labels, shape):
    seen = []
    for s in _sessions(adapter):
        run = s.run
        monkeypatch.setattr(s, "run", lambda names, feeds, run=run: seen.append(feeds)
                            or run(names, feeds))
    emb = adapter.encode(rgb(blob_image(shape, BLOBS)))
    cands = adapter.prompt_decoder.predict_masks(emb, xy(adapter, points_rc, shape), labels)
    coords = next(v for k, v in seen[-1].items() if k.endswith(("coords", "points")))
    labs = next(v for k, v in seen[-1].items() if k.endswith("labels"))
    return cands, coords.reshape(-1, 2), labs.reshape(-1)


@pytest.mark.parametrize("layout", ["jax", "pagarcia", "nso", "wkentaro", "autognosi"])
def test_padding_is_read_from_the_graph_and_masks_agree(layout, tmp_path, monkeypatch):
    r, c, rad = BLOBS[1]
    prompt = ([[r, c], [r - rad - 2, c - rad - 2], [r + rad + 2, c + rad + 2]], [1, 2, 3])
    masks = {}
    for pads in (True, False):
        a = open_adapter(_build(layout, tmp_path / str(pads), pads))
        assert {d.graph_pads for d in _decisions(a)} == {pads}
        assert all(d.source.startswith("graph") for d in _decisions(a))
        cands, coords, labs = _click_feeds(a, monkeypatch, *prompt, SHAPE)
        n = 3 if pads else 4  # the adapter appends (0, 0, -1) only to a graph that does not
        assert len(labs) == len(coords) == n
        if not pads:
            assert labs[-1] == -1 and not coords[-1].any()
        assert -1 not in labs[:3].tolist()
        masks[pads] = best_mask(cands, SHAPE)
    np.testing.assert_array_equal(masks[True], masks[False])
    assert iou(masks[True], disc(SHAPE, r, c, rad)) > 0.7


def test_a_missing_padding_point_would_change_the_masks(tmp_path):
    """The toy decoders punish a wrong decision, so the test above can fail."""
    a = open_adapter(build_pagarcia(tmp_path, memory=False, pads=False))
    emb = a.encode(rgb(blob_image(SHAPE, BLOBS)))
    r, c, _ = BLOBS[1]
    right = best_mask(a.prompt_decoder.predict_masks(emb, xy(a, [[r, c]]), [1]))
    for key, d in a.padding.items():
        a.padding[key] = type(d)(True, "forced wrong")
    wrong = best_mask(a.prompt_decoder.predict_masks(emb, xy(a, [[r, c]]), [1]))
    assert right.sum() > wrong.sum()


def test_a_far_sentinel_concatenated_in_the_head_is_not_padding(tmp_path):
    """Every toy head appends a (-1e4, -1e4, -1) sentinel: not SAM's (0, 0) padding point."""
    folder = build_jax_video(tmp_path, memory=False, pads=False)
    a = open_adapter(folder)
    sig = next(iter(a.decoders.values())).signature
    assert not decide_padding(sig, "input_points", "input_labels", True).graph_pads


def test_unreadable_graph_falls_back_to_the_layout_default(tmp_path):
    a = open_adapter(build_jax_video(tmp_path, memory=False, pads=False))
    sig = next(iter(a.decoders.values())).signature
    data = sig.path.read_bytes()
    sig.path.write_bytes(data[: len(data) // 2])
    d = decide_padding(sig, "input_points", "input_labels", True)
    assert d.graph_pads and d.source.startswith("layout default")


# ---- inspect -----------------------------------------------------------------------------
@pytest.mark.parametrize("layout, pads, want", [
    ("jax", False, {"padding": "adapter appends", "pointer encoding": "zeros",
                    "no-memory embedding": "added", "normalisation": "constants.json"}),
    ("pagarcia", True, {"padding": "graph pads itself", "pointer encoding": "memory-attention"}),
    ("nso", True, {"padding": "graph pads itself", "no-memory embedding": "constants.npz"}),
    ("wkentaro", True, {"padding": "graph pads itself", "score cut": "0.5",
                        "mask kind": "probabilities", "normalisation": "uint8"}),
    ("autognosi", False, {"padding": "adapter appends", "mask kind": "binary"}),
])
def test_inspect_prints_every_assumption_with_its_source(layout, pads, want, tmp_path, capsys):
    from napari_sam3_onnx.cli import main

    folder = _build(layout, tmp_path / layout, pads)
    if layout in ("jax", "pagarcia", "nso"):  # with memory graphs
        folder = {"jax": build_jax_video, "pagarcia": build_pagarcia,
                  "nso": build_nso}[layout](tmp_path / "m", pads=pads)
    assert main(["inspect", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "assumptions (value  [source]):" in lines
    for name, fragment in want.items():
        line = next(x for x in lines if x.strip().startswith(name))
        assert fragment in line and line.rstrip().endswith("]"), line


def test_memory_note_says_pointer_encoding_is_missing_only_then(tmp_path):
    bare = open_adapter(build_jax_video(tmp_path / "bare"))
    assert "without their temporal encoding" in bare.memory_graphs.memory_note
    full = open_adapter(build_jax_video(tmp_path / "full", pointer_encoding="object"))
    assert full.memory_graphs.memory_note == ""
    assert open_adapter(build_pagarcia(tmp_path / "pag")).memory_graphs.memory_note == ""
