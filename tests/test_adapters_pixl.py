"""PIXL's SAM 3 and EfficientSAM3 exports: position encodings told from levels by the graph's
nodes, a third text output, 8 exemplar slots, a 16-token student text context padded to 32."""

import numpy as np
import pytest

from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import LayoutMismatchError
from napari_sam3_onnx.testing.concepts import EOT, SOT, TOKEN_ANY
from napari_sam3_onnx.testing.pixl import EFFICIENT, build_pixl
from napari_sam3_onnx.testing.scenes import INSTANCES, check_instances, planted_image

SHAPE = (60, 90)
RGB = planted_image(SHAPE)
MID = INSTANCES[2]


def words(adapter):
    return adapter.concept_detector.encode_text([SOT, TOKEN_ANY, EOT])


@pytest.fixture(scope="module", params=[False, True], ids=["pixl-sam3", "pixl-efficientsam3"])
def pixl(request, tmp_path_factory):
    return open_adapter(build_pixl(tmp_path_factory.mktemp("pixl"), efficient=request.param))


def test_opens_with_text_and_eight_exemplar_slots(pixl):
    assert pixl.layout == "pixl-sam3"
    assert {c.value for c in pixl.capabilities} == {"encode", "text", "exemplars", "boxes"}
    assert pixl.concept_detector.max_exemplars == 8
    emb = pixl.encode(RGB)
    assert set(emb.features) == {"output_0", "output_2", "output_4"}  # encodings kept once
    check_instances(pixl.concept_detector.detect(emb, words(pixl)), INSTANCES, SHAPE)
    check_instances(pixl.concept_detector.detect(emb, words(pixl),
                                                 MID.box_cxcywh(SHAPE, 0.6)[None]), [MID], SHAPE)
    with pytest.raises(ValueError, match="at most 8"):
        pixl.concept_detector.detect(emb, words(pixl), np.tile(MID.box_cxcywh(SHAPE), (9, 1)))


def test_position_encoding_found_by_graph_nodes_and_checked(pixl, monkeypatch):
    found = pixl.assumptions()["position encodings"]
    assert found == ("level 2: output_5", f"{pixl.encoder.path.name}: told apart by graph nodes")
    emb = pixl.encode(RGB)
    right = pixl.constants()
    monkeypatch.setattr(pixl, "_constants", {k: np.zeros_like(v) for k, v in right.items()})
    check_instances(pixl.concept_detector.detect(emb, words(pixl)), [], SHAPE)


def test_short_student_text_context_is_padded_to_the_decoders(pixl, monkeypatch):
    side, _ = pixl.prompts["side"]
    calls = []
    run = side.run
    monkeypatch.setattr(side, "run", lambda n, f: calls.append(f) or run(n, f))
    pixl.concept_detector.detect(pixl.encode(RGB), words(pixl))
    feat, pad = calls[0]["language_features"], calls[0]["language_padding"]
    context = pixl.concept_detector.context_length
    assert context == (16 if EFFICIENT[1] == pixl.language.path.name else 32)
    assert feat.shape[0] == pad.shape[1] == 32
    assert not pad[0, :3].any() and pad[0, 3:].all()
    assert not feat[context:].any()
    assert ("language_embeds" in calls[0]) == (context == 32)  # PIXL's third text input


def test_ambiguous_levels_without_readable_nodes_are_refused(tmp_path, monkeypatch):
    from napari_sam3_onnx.models.adapters import _levels

    monkeypatch.setattr(_levels, "constant_outputs", lambda sig: None)
    with pytest.raises(LayoutMismatchError, match=r"output_5.*matches none of the encoder"):
        open_adapter(build_pixl(tmp_path))
