"""A cheap image encoder changes nothing else: a convolutional student emitting SAM 3's encoder
tensors (the EfficientSAM3 idea) in a composite hf-sam3 folder gives the same clicks, text,
propagation, store and tiled search as the full encoder, and says what it is."""

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.hf_sam3 import DUAL_ENCODER, STUDENT_ENCODER, build_dual
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer

Z, SHAPE = 6, (90, 140)
DISCS = ((25, 30, 9), (60, 100, 11))


def stack(z=Z, shape=SHAPE, shift=4):
    out = np.full((z, *shape), 20, np.uint8)
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    for k in range(z):
        for r, c, rad in DISCS:
            out[k][(rr - r) ** 2 + (cc - c - shift * k) ** 2 <= rad ** 2] = 220
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = {}
    for name, student in (("teacher", False), ("student", True)):
        folder = build_dual(tmp_path_factory.mktemp(name), memory=True, student=student)
        write_toy_tokenizer(folder)
        out[name] = api.Bundle(open_adapter(folder), folder)
    return out


def test_the_student_says_what_it_is(pair):
    student, teacher = pair["student"].adapter, pair["teacher"].adapter
    assert student.encoder.path.name == STUDENT_ENCODER
    assert teacher.encoder.path.name == DUAL_ENCODER and teacher.encoder_kind is None
    assert student.encoder_kind.startswith("EfficientSAM3 student image encoder, ")
    assert "M parameters" in student.encoder_kind
    assert student.capabilities == teacher.capabilities  # every workflow


def test_clicks_text_and_propagation_are_unchanged(pair):
    data = stack()
    seen = {}
    for name, bundle in pair.items():
        click = api.segment(bundle, data, [[25, 38]], index=(2,)).mask
        text = api.search_text(bundle, data, "thing").labels
        labels, res = api.propagate(bundle, data, {1: api.Seed.clicks(2, [[25, 38]])})
        assert res.method == "memory"
        seen[name] = (click, text, labels)
    for got, want in zip(seen["student"], seen["teacher"], strict=True):
        assert want.any()
        np.testing.assert_array_equal(got, want)


def test_store_and_tiles_are_unchanged(pair, tmp_path):
    data, large = stack(z=2), stack(z=1, shape=(150, 260))
    seen = {}
    for name, bundle in pair.items():
        store = tmp_path / f"{name}.zarr"
        report = api.precompute(bundle, data, store)
        assert report.encoded == 2
        stored = api.search_text(bundle, data, "thing", store=store).labels
        tiled = api.search_text(bundle, large, "thing", tile=112).labels
        seen[name] = (stored, tiled)
    for got, want in zip(seen["student"], seen["teacher"], strict=True):
        assert want.any()
        np.testing.assert_array_equal(got, want)
