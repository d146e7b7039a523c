"""Adapters as compositions of roles: accessors, typed errors, capabilities = roles present."""

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx.models.base import Capability, Embedding, MaskCandidates, SamAdapter
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import CapabilityError, MissingCapabilityError
from napari_sam3_onnx.models.memory import CONDITIONED
from napari_sam3_onnx.models.roles import (
    BatchPromptDecoder,
    ConceptDetector,
    MemoryGraphs,
    PromptDecoder,
    predict_point_batch,
)
from napari_sam3_onnx.testing.autognosi import build_autognosi
from napari_sam3_onnx.testing.comicapp import build_comicapp
from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.nso import build_nso
from napari_sam3_onnx.testing.pagarcia import build_pagarcia
from napari_sam3_onnx.testing.samexporter import build_samexporter
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03, build_wkentaro_v06

BUILDERS = {
    "nso": build_nso, "jax": build_jax_video, "pagarcia": build_pagarcia,
    "autognosi": build_autognosi, "hf": build_hf_tracker, "comicapp": build_comicapp,
    "samexporter": build_samexporter, "wk-v0.6": build_wkentaro_v06, "wk-v0.3": build_wkentaro_v03,
}
#: accessor -> (capability that means the role exists, protocol the role satisfies)
ROLES = {
    "prompt_decoder": (Capability.CLICKS, PromptDecoder),
    "concept_detector": (Capability.TEXT, ConceptDetector),
    "memory_graphs": (Capability.MEMORY, MemoryGraphs),
}
SRC = Path(__file__).resolve().parents[1] / "src" / "napari_sam3_onnx"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_a_role_exists_exactly_when_its_capability_does(name, tmp_path):
    adapter = open_adapter(BUILDERS[name](tmp_path))
    present = 0
    for accessor, (capability, protocol) in ROLES.items():
        if adapter.has(capability):
            present += 1
            assert isinstance(getattr(adapter, accessor), protocol)
            adapter.require(capability)
            continue
        with pytest.raises(MissingCapabilityError) as info:
            getattr(adapter, accessor)
        assert isinstance(info.value, CapabilityError)
        assert info.value.capability == capability.value and info.value.layout == adapter.layout
        assert adapter.layout in str(info.value) and repr(capability.value) in str(info.value)
        with pytest.raises(MissingCapabilityError):
            adapter.require(capability)
    assert present >= 1  # every toy bundle plays at least one role beyond encoding


def test_wkentaro_v06_composes_its_point_decoder(tmp_path):
    adapter = open_adapter(build_wkentaro_v06(tmp_path))
    assert adapter.prompt_decoder is adapter.points  # a role object, not the adapter itself
    assert {Capability.CLICKS, Capability.BOXES} <= adapter.capabilities
    image = blob_image((70, 96), ((20, 30, 8),))
    emb = adapter.encode(np.repeat(image[..., None], 3, axis=2))
    pts, labels = np.array([[40.0, 25.0]], np.float32), np.array([1])
    via_adapter = adapter.prompt_decoder.predict_masks(emb, pts, labels)
    via_role = adapter.prompt_decoder.predict_masks(emb, pts, labels)
    np.testing.assert_array_equal(via_adapter.logits, via_role.logits)
    assert adapter.prompt_decoder.accepts_mask_input == adapter.points.accepts_mask_input


def test_wkentaro_v03_has_no_prompt_decoder_but_keeps_detector_boxes(tmp_path):
    adapter = open_adapter(build_wkentaro_v03(tmp_path))
    assert adapter.has(Capability.BOXES) and not adapter.has(Capability.CLICKS)
    with pytest.raises(MissingCapabilityError, match="clicks"):
        adapter.prompt_decoder  # noqa: B018
    with pytest.raises(MissingCapabilityError, match="clicks"):
        adapter.prompt_decoder.predict_masks(None, np.zeros((1, 2), np.float32), np.ones(1))


class _Decoder:
    """A composed prompt-decoder role that records its calls."""

    mask_size = (6, 10)
    accepts_mask_input = True

    def __init__(self):
        self.calls = []

    def predict_masks(self, embedding, points_xy, labels, mask_input=None):
        self.calls.append((points_xy.shape, mask_input is not None))
        return MaskCandidates(np.zeros((1, 6, 10), np.float32), np.ones(1, np.float32), 1.0,
                              False)


class _Composed(SamAdapter):
    layout = "composed-test"

    def __init__(self, decoder=None):
        if decoder is not None:
            self._attach_prompt_decoder(decoder)


def test_attaching_a_role_grants_its_capabilities_and_operations_delegate():
    bare = _Composed()
    assert bare.capabilities == frozenset({Capability.ENCODE})
    with pytest.raises(MissingCapabilityError, match="clicks"):
        bare.prompt_decoder  # noqa: B018
    role = _Decoder()
    adapter = _Composed(role)
    assert {Capability.CLICKS, Capability.BOXES} <= adapter.capabilities
    assert Capability.TEXT not in adapter.capabilities
    assert adapter.prompt_decoder is role and adapter.prompt_decoder.accepts_mask_input
    emb = Embedding({}, (6, 10), (12, 20))
    adapter.prompt_decoder.predict_masks(emb, np.zeros((2, 2), np.float32), np.ones(2),
                                         np.zeros((6, 10)))
    # a decoder without a batch axis gets one call per point
    batch = predict_point_batch(adapter.prompt_decoder, emb, np.zeros((3, 2), np.float32))
    assert len(batch) == 3 and role.calls == [((2, 2), True)] + [((1, 2), False)] * 3
    assert bare.capabilities == frozenset({Capability.ENCODE})  # class state untouched


def test_point_batches_use_the_decoders_own_batch_path_where_it_has_one(tmp_path):
    adapter = open_adapter(build_nso(tmp_path))
    decoder = adapter.prompt_decoder
    assert isinstance(decoder, BatchPromptDecoder)
    emb = adapter.encode(np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2))
    xy = np.array([[40.0, 25.0], [10.0, 60.0], [70.0, 5.0]], np.float32)
    seen = []
    own = decoder.predict_point_batch
    decoder.predict_point_batch = lambda e, p: seen.append(p.shape) or own(e, p)
    got = predict_point_batch(decoder, emb, xy)
    assert seen == [(3, 2)] and len(got) == 3
    for p, cands in zip(xy, got, strict=True):
        one = decoder.predict_masks(emb, p[None], np.ones(1, np.int64))
        np.testing.assert_allclose(cands.logits, one.logits, atol=1e-5)
    assert not isinstance(_Decoder(), BatchPromptDecoder)  # gets one call per point instead


def test_a_capability_cannot_be_declared_only_earned_by_attaching_a_role():
    adapter = _Composed()
    with pytest.raises(AttributeError):
        adapter.capabilities = frozenset(Capability)
    assert adapter.capabilities == frozenset({Capability.ENCODE})
    for accessor, (capability, _) in ROLES.items():
        with pytest.raises(MissingCapabilityError, match=capability.value):
            getattr(adapter, accessor)
    assert not hasattr(adapter, "predict_masks") and not hasattr(adapter, "detect")
    assert not hasattr(adapter, "memory_encode")  # the operations live on the roles only


def test_nothing_outside_models_calls_a_private_adapter_method():
    offenders = []
    pattern = re.compile(r"\b(adapter|a|ad)\._[a-z]\w*")  # the names adapters go by
    outside = [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] != "models"]
    for path in [*outside, *BENCHMARKS.rglob("*.py")]:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.name}:{lineno}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("name", ["wk-v0.3", "wk-v0.6", "samexporter"])
def test_wk_family_composes_its_concept_detector(name, tmp_path):
    adapter = open_adapter(BUILDERS[name](tmp_path))
    role = adapter.concept_detector
    assert role is adapter.concepts and role is not adapter
    assert role.min_score == (0.0 if name == "samexporter" else 0.5)
    assert adapter.concept_detector.max_exemplars == role.max_exemplars
    assert adapter.concept_detector.context_length == role.context_length
    assert adapter.has(Capability.EXEMPLARS) == (role.max_exemplars is not None)
    ids = [49406, 320, 2368, 49407]
    text = adapter.concept_detector.encode_text(ids, "a cat")
    assert text.text == "a cat"
    image = np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2)
    emb = adapter.encode(image)
    got, want = adapter.concept_detector.detect(emb, text), role.detect(emb, role.encode_text(ids))
    np.testing.assert_array_equal(got.scores, want.scores)
    np.testing.assert_array_equal(got.masks, want.masks)


def test_pagarcia_composes_its_memory_graphs_and_keeps_them_optional(tmp_path):
    adapter = open_adapter(build_pagarcia(tmp_path / "full"))
    role = adapter.memory_graphs
    assert role is not adapter and role.memory_settings is adapter.memory_graphs.memory_settings
    assert role.encoder is adapter.memory_encoder and role.attention is adapter.memory_attention
    image = np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2)
    emb = adapter.encode(image)
    cands = adapter.prompt_decoder.predict_masks(emb, np.array([[40.0, 25.0]], np.float32),
                                                 np.array([1]))
    k = int(np.argmax(np.nan_to_num(cands.iou, nan=0.0)))
    frame = adapter.memory_graphs.memory_encode(emb, cands.logits[k], cands.object_score, True)
    same = role.memory_encode(emb, cands.logits[k], cands.object_score, True)
    np.testing.assert_array_equal(frame.features, same.features)
    ptr = cands.extras["object_pointer"][None]
    a = adapter.memory_graphs.memory_attend(emb, [frame], [6], ptr, [1.0])
    b = role.memory_attend(emb, [frame], [6], ptr, [1.0])
    np.testing.assert_array_equal(a.features[CONDITIONED], b.features[CONDITIONED])
    assert np.abs(a.features[CONDITIONED] - emb.features["image_embeddings.2"]).max() > 0
    clicks_only = open_adapter(build_pagarcia(tmp_path / "clicks", memory=False))
    assert clicks_only.has(Capability.CLICKS) and not clicks_only.has(Capability.MEMORY)
    with pytest.raises(MissingCapabilityError, match="memory"):
        clicks_only.memory_graphs  # noqa: B018
    with pytest.raises(MissingCapabilityError, match="memory"):
        clicks_only.memory_graphs.memory_encode(emb, cands.logits[k], cands.object_score, True)


def test_jax_video_composes_its_memory_graphs(tmp_path):
    adapter = open_adapter(build_jax_video(tmp_path / "full"))
    role = adapter.memory_graphs
    assert role is not adapter and role.pointer_encoding is adapter.pointer_encoding
    assert role.memory_note != ""  # no pointer encoding shipped
    image = np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2)
    fresh = open_adapter(build_jax_video(tmp_path / "fresh"))
    emb = adapter.encode(image)
    cands = adapter.prompt_decoder.predict_masks(emb, np.array([[40.0, 25.0]], np.float32),
                                                 np.array([1]))
    k = int(np.argmax(cands.iou))
    frame = adapter.memory_graphs.memory_encode(emb, cands.logits[k], cands.object_score, True)
    ptr = cands.extras["object_pointer"][None]
    want = adapter.memory_graphs.memory_attend(emb, [frame], [6], ptr, [1.0]).features[CONDITIONED]
    # an adapter that has encoded nothing yet fetches the position encoding itself
    got = fresh.memory_graphs.memory_attend(emb, [frame], [6], ptr, [1.0]).features[CONDITIONED]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    clicks_only = open_adapter(build_jax_video(tmp_path / "clicks", memory=False))
    assert clicks_only.has(Capability.CLICKS) and not clicks_only.has(Capability.MEMORY)
    with pytest.raises(MissingCapabilityError, match="memory"):
        clicks_only.memory_graphs  # noqa: B018


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_layout_composes_each_role_it_has(name, tmp_path):
    adapter = open_adapter(BUILDERS[name](tmp_path))
    present = [a for a, (cap, _) in ROLES.items() if adapter.has(cap)]
    assert present
    for accessor in present:
        role = getattr(adapter, accessor)
        assert role is not adapter and not isinstance(role, SamAdapter)


def test_nso_composes_three_roles_and_they_answer_like_the_adapter(tmp_path):
    adapter = open_adapter(build_nso(tmp_path))
    roles = [adapter.prompt_decoder, adapter.concept_detector, adapter.memory_graphs]
    assert len({id(r) for r in roles}) == 3 and adapter not in roles
    assert adapter.has(Capability.EXEMPLARS) and adapter.has(Capability.BOXES)
    image = np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2)
    emb = adapter.encode(image)
    pts, labels = np.array([[40.0, 25.0]], np.float32), np.array([1])
    cands = adapter.prompt_decoder.predict_masks(emb, pts, labels)
    assert cands.logits.shape[1:] == adapter.mask_size and cands.single_mask_first
    batch = adapter.prompt_decoder.predict_point_batch(emb, np.repeat(pts, 2, axis=0))
    np.testing.assert_allclose(batch[0].logits, cands.logits, atol=1e-5)
    text = adapter.concept_detector.encode_text([49406, 320, 49407], "a")
    assert text.text == "a"
    det = adapter.concept_detector.detect(emb, text)
    assert det.mask_kind == "logits" and det.min_score == 0.0
    k = int(np.argmax(cands.iou))
    frame = adapter.memory_graphs.memory_encode(emb, cands.logits[k], cands.object_score, True)
    ptr = cands.extras["object_pointer"][None]
    out = adapter.memory_graphs.memory_attend(emb, [frame], [6], ptr, [1.0])
    assert CONDITIONED in out.features
    bare = open_adapter(build_nso(tmp_path / "bare", concepts=False, memory=False))
    assert bare.has(Capability.CLICKS) and not bare.has(Capability.TEXT)
    with pytest.raises(MissingCapabilityError, match="text"):
        bare.concept_detector  # noqa: B018
    with pytest.raises(MissingCapabilityError, match="memory"):
        bare.memory_graphs  # noqa: B018


def test_autognosi_composes_its_detector_and_a_forced_bit_order_sticks(tmp_path, monkeypatch):
    from napari_sam3_onnx.models.adapters.autognosi import AutognosiAdapter

    adapter = open_adapter(build_autognosi(tmp_path / "a"))
    role = adapter.concept_detector
    assert role is adapter.concepts and role.max_exemplars == 0
    assert adapter.has(Capability.TEXT) and not adapter.has(Capability.EXEMPLARS)
    assert role.bit_order is None and "not decided" in adapter.assumptions()["mask bit order"][0]
    monkeypatch.setattr(AutognosiAdapter, "force_bit_order", "little")
    forced = open_adapter(build_autognosi(tmp_path / "b"))
    assert forced.concepts.bit_order == "little"
    assert forced.assumptions()["mask bit order"] == ("little", "forced")


def test_hf_tracker_box_alone_goes_through_its_prompt_decoder(tmp_path):
    adapter = open_adapter(build_hf_tracker(tmp_path))
    seen = []
    run = adapter.decoder.run
    adapter.decoder.run = lambda names, feeds: seen.append(feeds) or run(names, feeds)
    image = np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2)
    emb = adapter.encode(image)
    box = np.array([[10.0, 5.0], [60.0, 40.0]], np.float32)
    cands = adapter.prompt_decoder.predict_masks(emb, box, np.array([2, 3]))
    assert cands.logits.shape[1:] == adapter.mask_size
    assert not adapter.prompt_decoder.accepts_mask_input
    np.testing.assert_array_equal(seen[0]["input_boxes"], [[[10.0, 5.0, 60.0, 40.0]]])
    # No padding point: transformers' tracker embeds a box alone with zero points (the
    # export tier checks this against transformers on a graph traced from it).
    assert seen[0]["input_points"].shape == (1, 1, 0, 2)
    assert seen[0]["input_labels"].shape == (1, 1, 0)
    assert len(seen) == 1  # this graph takes zero points: no padded retry
    assert cands.logits.max() > 0  # the toy decoder answered the box with a mask


def test_hf_tracker_box_alone_falls_back_to_a_padding_point_where_zero_points_fail(tmp_path):
    adapter = open_adapter(build_hf_tracker(tmp_path))
    seen = []
    run = adapter.decoder.run

    def refuse_zero_points(names, feeds):
        seen.append(feeds)
        if feeds["input_points"].shape[2] == 0:
            raise RuntimeError("this graph cannot take zero points")
        return run(names, feeds)

    adapter.decoder.run = refuse_zero_points
    image = np.repeat(blob_image((70, 96), ((20, 30, 8),))[..., None], 3, axis=2)
    emb = adapter.encode(image)
    box, labels = np.array([[10.0, 5.0], [60.0, 40.0]], np.float32), np.array([2, 3])
    adapter.prompt_decoder.predict_masks(emb, box, labels)
    np.testing.assert_array_equal(seen[1]["input_labels"], [[[-1]]])  # SAM's padding point
    adapter.prompt_decoder.predict_masks(emb, box, labels)
    assert len(seen) == 3  # remembered: the second box goes straight to the padded feed
