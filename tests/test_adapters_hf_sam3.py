"""Hugging Face Sam3Model-family exports (hf-sam3): danilobukvic, wW-Ww, parodiniccolo's dual
encoder, Intel Geti's usls names; one encode for text and clicks; a composite folder with the
jax-video memory graphs propagates exactly as the jax-video bundle does."""

import numpy as np
import pytest

from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tracking.propagation import Seed, propagate
from napari_sam3_onnx.models.base import Capability as C
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import LayoutMismatchError
from napari_sam3_onnx.testing import hf_sam3 as hf
from napari_sam3_onnx.testing.concepts import EOT, SOT, TOKEN_ANY, TOKEN_BRIGHT
from napari_sam3_onnx.testing.geometry import SMALL
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.scenes import INSTANCES, check_instances, planted_image

SHAPE = (60, 90)
RGB = planted_image(SHAPE)
BASE = {C.ENCODE, C.TEXT}
TRACK = BASE | {C.CLICKS, C.BOXES}
EXPORTS = {
    "danilobukvic": (hf.build_danilobukvic, BASE),
    "wW-Ww": (hf.build_wwww, TRACK),
    "geti": (hf.build_geti, BASE | {C.EXEMPLARS, C.BOXES}),
    "parodiniccolo+danilobukvic+onnx-community": (hf.build_dual, TRACK),
    "parodiniccolo+danilobukvic+jax-video": (lambda f: hf.build_dual(f, memory=True),
                                             TRACK | {C.MEMORY}),
}


def words(adapter, token=TOKEN_ANY):
    return adapter.concept_detector.encode_text([SOT, token, EOT])


def spy(monkeypatch, session):
    calls = []
    run = session.run
    monkeypatch.setattr(session, "run", lambda names, feeds: calls.append(
        (list(names), dict(feeds))) or run(names, feeds))
    return calls


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_sam3")
    return {name: open_adapter(build(root / name.replace("+", "_")))
            for name, (build, _) in EXPORTS.items()}


@pytest.mark.parametrize("name", list(EXPORTS))
def test_each_export_opens_with_every_capability_and_finds_the_blobs(opened, name):
    adapter = opened[name]
    assert adapter.layout == "hf-sam3"
    assert adapter.capabilities == EXPORTS[name][1]
    emb = adapter.encode(RGB)
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)
    check_instances(adapter.concept_detector.detect(emb, words(adapter, TOKEN_BRIGHT)),
                    [INSTANCES[0], INSTANCES[1]], SHAPE)
    found = adapter.assumptions()
    assert {"score", "detector roles", "feature levels", "text mask"} <= set(found)


def test_wwww_levels_by_size_and_bool_text_mask_true_for_tokens(opened, monkeypatch):
    adapter = opened["wW-Ww"]
    assert [t.name for t in adapter.outputs.levels] == [f"features_{s}" for s in SMALL.levels]
    calls = spy(monkeypatch, adapter.detector)
    adapter.concept_detector.detect(adapter.encode(RGB), words(adapter))
    mask = calls[0][1]["text_mask"]
    assert mask.dtype == bool and mask[0, :3].all() and not mask[0, 3:].any()
    assert adapter.presence == "presence_logits"


def test_constant_presence_is_read_from_the_graph_and_not_multiplied(opened):
    adapter = opened["geti"]
    assert adapter.presence is None
    assert "constant" in adapter.assumptions()["score"][0]
    det = adapter.concept_detector.detect(adapter.encode(RGB), words(adapter))
    # sigmoid(0) = 0.5 multiplied in would have put every score at or below 0.5
    assert (det.scores > 0.5).sum() == len(INSTANCES)
    assert "geometry_features" in adapter.roles and "prompt_mask" in {
        t.name for t in adapter.roles.values()}


def test_a_zero_presence_built_from_an_input_shape_is_a_constant_too(tmp_path):
    adapter = open_adapter(hf.build_geti(tmp_path / "geti", presence="shape-zero"))
    assert adapter.presence is None and "constant" in adapter.assumptions()["score"][0]
    det = adapter.concept_detector.detect(adapter.encode(RGB), words(adapter))
    check_instances(det, INSTANCES, SHAPE)


def test_geti_exemplars_go_through_its_geometry_encoder(opened, monkeypatch):
    adapter = opened["geti"]
    assert adapter.geometry.path.name == "geometry-encoder.onnx"
    assert adapter.concept_detector.max_exemplars is None  # rows are dynamic
    calls = spy(monkeypatch, adapter.geometry)
    emb, mid = adapter.encode(RGB), INSTANCES[2]
    found = adapter.concept_detector.detect(emb, words(adapter), mid.box_cxcywh(SHAPE, 0.6)[None])
    check_instances(found, [mid], SHAPE)
    feeds = calls[0][1]
    np.testing.assert_allclose(feeds["input_boxes"][0, 0], mid.box_cxcywh(SHAPE, 0.6))
    assert feeds["input_boxes_labels"].tolist() == [[1]]
    assert feeds["input_points"].shape == (1, 0, 2)
    negative = adapter.concept_detector.detect(emb, words(adapter),
                                               mid.box_cxcywh(SHAPE, 0.6)[None], np.array([0]))
    check_instances(negative, [b for b in INSTANCES if b is not mid], SHAPE)


def test_danilobukvic_position_encoding_is_fed_from_the_encoder(opened, monkeypatch):
    adapter = opened["danilobukvic"]
    assert adapter.presence is None and "no presence" in adapter.assumptions()["score"][0]
    emb = adapter.encode(RGB)
    assert set(emb.features) == {f"fpn_hidden_state_{i}" for i in range(3)}  # no 4th level
    right = adapter.constants()
    assert set(right) == {"fpn_position_encoding_2"}
    monkeypatch.setattr(adapter, "_constants", {k: np.zeros_like(v) for k, v in right.items()})
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), [], SHAPE)


@pytest.mark.parametrize("name", ["wW-Ww", "parodiniccolo+danilobukvic+onnx-community"])
def test_one_encode_answers_text_and_a_click(opened, name, monkeypatch):
    adapter = opened[name]
    adapter._constants = None  # as freshly opened
    calls = spy(monkeypatch, adapter.encoder)
    emb = adapter.encode(RGB)
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)
    mid = INSTANCES[2]
    cand = adapter.prompt_decoder.predict_masks(emb, mid.centre_xy(SHAPE, adapter.input_size)[None],
                                                np.array([1]))
    best = cand.logits[int(np.argmax(cand.iou))] > 0
    size = best.shape[-1]
    assert best[mid.centre_rc(size, SHAPE)]
    assert not any(best[b.centre_rc(size, SHAPE)] for b in INSTANCES if b is not mid)
    assert len(calls) == 1  # detector levels, tracker maps and constants in one run


# ---- a composite folder propagates as the jax-video bundle does ---------------------------
Z = 8
BLOB = (10.0, 14.0, 1.0, 3.2, 6)


def _stack():
    stack = np.zeros((Z, *SHAPE), np.uint8)
    rr, cc = np.mgrid[: SHAPE[0], : SHAPE[1]]
    for z in range(Z):
        r, c = BLOB[0] + BLOB[2] * z, BLOB[1] + BLOB[3] * z
        stack[z][(rr - r) ** 2 + (cc - c) ** 2 <= BLOB[4] ** 2] = 200
    return stack


def _propagate(adapter):
    stack = _stack()
    encoder = SliceEncoder(adapter)
    refs = [SliceRef(stack, (k,), source="stack") for k in range(Z)]
    seed = Seed.clicks(3, [(BLOB[0] + 3 * BLOB[2], BLOB[1] + 3 * BLOB[3])])
    return propagate(adapter, encoder, refs, {1: seed}), encoder


def test_composite_folder_propagates_as_the_jax_bundle_on_one_encode(opened, tmp_path):
    composite = opened["parodiniccolo+danilobukvic+jax-video"]
    reference = open_adapter(build_jax_video(tmp_path / "jax"))
    got, enc = _propagate(composite)
    want, _ = _propagate(reference)
    assert got.method == want.method == "memory"
    assert got.objects[1].slices == want.objects[1].slices == list(range(Z))
    for z in range(Z):
        np.testing.assert_array_equal(got.objects[1].mask(z), want.objects[1].mask(z))
    assert enc.encoder_calls == Z
    notes = composite.assumptions()
    assert "no_mem_embed" in notes["no-memory embedding"][0]
    assert notes["memory position encoding"][0].startswith("fpn_position_encoding_2")


def test_tracker_graphs_of_another_geometry_are_refused_by_name(tmp_path):
    folder = hf.build_dual(tmp_path / "mixed", memory=True)
    hf.build_encoder(folder / hf.DUAL_ENCODER, SMALL, "hf", tracker=True)  # another grid
    hf.build_detector(folder / hf.DANI[2], SMALL, "hf", presence="none")
    (folder / "prompt_encoder_mask_decoder.onnx").unlink()
    with pytest.raises(LayoutMismatchError, match=r"feats0.*image_embeddings\.0"):
        open_adapter(folder)


def test_fetch_assembles_the_public_mission_folder_from_three_repositories(tmp_path):
    from fake_hub import FakeHub
    from napari_sam3_onnx.models.bundle_spec import BundleSpec
    from napari_sam3_onnx.models.download import download_bundle
    from napari_sam3_onnx.models.hub_fetch import hub_location
    from napari_sam3_onnx.models.known_bundles import CLIP_BPE
    from napari_sam3_onnx.models.registry import get_bundle

    built = hf.build_dual(tmp_path / "built", memory=True, mission=True)
    spec = get_bundle("public-mission")
    spec = BundleSpec(**{**vars(spec), "files": tuple(f for f in spec.files if f != CLIP_BPE)})
    assert {f.name for f in spec.files} == {p.name for p in built.iterdir()}
    hub = FakeHub()
    try:
        for f in spec.files:
            repo, revision, path = hub_location(f.url)
            hub.files[f"/{repo}/resolve/{revision}/{path}"] = (built / f.name).read_bytes()
        folder = download_bundle(spec, dest=tmp_path / "fetched", endpoint=hub.endpoint,
                                 retry_wait=0)
    finally:
        hub.close()
    repos = {hub_location(f.url)[0] for f in spec.files}
    assert repos == {"parodiniccolo/sam3-dual-webgpu", "danilobukvic/sam3-text-onnx",
                     "jax-image-tools/sam3-video-onnx"}
    adapter = open_adapter(folder)
    assert adapter.layout == "hf-sam3" and adapter.capabilities == TRACK | {C.MEMORY}
    assert {c.value for c in adapter.capabilities} == get_bundle("public-mission").capabilities
    check_instances(adapter.concept_detector.detect(adapter.encode(RGB), words(adapter)),
                    INSTANCES, SHAPE)


def test_memory_graphs_without_an_encoder_position_encoding_are_left_out_and_said(tmp_path):
    import shutil

    from napari_sam3_onnx.testing.memory import MEMORY_SMALL

    folder = hf.build_wwww(tmp_path / "wwww", MEMORY_SMALL)
    jax = build_jax_video(tmp_path / "jax")
    for name in ("mask_decoder.onnx", "memory_attention.onnx", "memory_encoder.onnx",
                 "constants.json"):
        shutil.copy(jax / name, folder / name)
    adapter = open_adapter(folder)
    assert adapter.capabilities == TRACK  # clicks through the jax mask decoder, no memory
    assert "does not emit" in adapter.assumptions()["memory"][0]


def test_inspect_lists_the_composite_roles_and_assumptions(tmp_path, capsys):
    from napari_sam3_onnx.cli import main

    folder = hf.build_dual(tmp_path / "mission", memory=True, student=True)
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "layout:       hf-sam3" in out
    assert "capabilities: boxes, clicks, encode, memory, text" in out
    assert "encoder:      EfficientSAM3 student image encoder" in out
    for line in ("detector roles", "position_2=fpn_position_encoding_2", "tracker",
                 "no-memory embedding", "memory position encoding", "text mask"):
        assert line in out, line


def test_a_sam3model_decoder_with_input_boxes_takes_exemplars(tmp_path):
    folder = hf.build_danilobukvic(tmp_path / "boxes")
    hf.build_detector(folder / hf.DANI[2], SMALL, "hf", presence="output", boxes=True)
    adapter = open_adapter(folder)
    assert adapter.capabilities == BASE | {C.EXEMPLARS, C.BOXES}
    assert adapter.concept_detector.max_exemplars is None
    emb, mid = adapter.encode(RGB), INSTANCES[2]
    check_instances(adapter.concept_detector.detect(emb, words(adapter)), INSTANCES, SHAPE)
    boxed = adapter.concept_detector.detect(emb, words(adapter), mid.box_cxcywh(SHAPE, 0.6)[None])
    check_instances(boxed, [mid], SHAPE)
    two = np.stack([mid.box_cxcywh(SHAPE, 0.6), INSTANCES[0].box_cxcywh(SHAPE, 0.6)])
    check_instances(adapter.concept_detector.detect(emb, words(adapter), two, np.array([1, 0])),
                    [mid], SHAPE)


def test_without_no_mem_embed_the_composite_says_what_it_feeds(tmp_path):
    import json

    folder = hf.build_dual(tmp_path / "nomem", memory=True)
    consts = json.loads((folder / "constants.json").read_text())
    del consts["no_mem_embed"]
    (folder / "constants.json").write_text(json.dumps(consts))
    adapter = open_adapter(folder)
    assert C.MEMORY in adapter.capabilities and adapter.tracker.no_mem is None
    value, source = adapter.assumptions()["no-memory embedding"]
    assert "used as the raw feature" in value and source.startswith("layout contract")
    emb = adapter.encode(RGB)  # feats2 is image_embeddings.2 as the encoder gave it
    np.testing.assert_allclose(emb.features["feats2"][0, 1].mean(), 0.1, atol=1e-6)
    got, _ = _propagate(adapter)
    assert got.method == "memory" and got.objects[1].slices == list(range(Z))
