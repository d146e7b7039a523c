"""The shipped toy bundle: every workflow finds the sample's nuclei at the default settings.

The toy is the registry entry ``"toy"``, built here once per definition (cached by digest).
Ground truth is :func:`~napari_sam3_onnx.samples.synthetic.synthetic_nuclei`'s labels; the
contrast window is the sample layer's (what the widget passes at its default).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from napari_sam3_onnx import api
from napari_sam3_onnx._napari.sample_data import synthetic_nuclei_sample
from napari_sam3_onnx.api.bundle_fetch import local_builder
from napari_sam3_onnx.api.propagate import propagate
from napari_sam3_onnx.api.text import search_text
from napari_sam3_onnx.engine.concepts.search import (
    DEFAULT_FLOOR,
    Exemplars,
    TextCache,
    search_slice,
)
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tracking.types import Seed
from napari_sam3_onnx.models import local_bundles
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import Sam3OnnxError
from napari_sam3_onnx.models.registry import get_bundle
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

MID = 6


@pytest.fixture(scope="module")
def sample():
    (image, meta, _kind), = synthetic_nuclei_sample()
    _, truth = synthetic_nuclei()
    return image, truth, tuple(meta["contrast_limits"])


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return api.open_bundle("toy", root=tmp_path_factory.mktemp("home"))


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max((a | b).sum(), 1))


def _centre(mask: np.ndarray) -> list[int]:
    rr, cc = np.nonzero(mask)
    return [round(float(rr.mean())), round(float(cc.mean()))]


def _best_iou(labels: np.ndarray, truth: np.ndarray) -> float:
    """IoU of ``truth`` (bool) with the label that covers most of it."""
    counts = np.bincount(labels[truth], minlength=2)
    counts[0] = 0
    return _iou(labels == int(counts.argmax()), truth) if counts.any() else 0.0


def test_toy_has_every_capability(toy):
    assert toy.adapter.capabilities == frozenset(Capability)


def test_text_nucleus_at_the_default_floor_finds_each_nucleus_once(toy, sample):
    image, truth, window = sample
    labels = np.asarray(search_text(toy, image, "nucleus", floor=DEFAULT_FLOOR,
                                    window=window).labels)
    for z in range(1, image.shape[0]):  # z = 0: one nucleus is too far out of focus
        ids = set(np.unique(labels[z])) - {0}
        assert len(ids) == 6, (z, ids)
        for n in range(1, 7):
            assert _best_iou(labels[z], truth[z] == n) > 0.65, (z, n)
    assert len(set(np.unique(labels[0])) - {0}) >= 5


def test_text_nothing_finds_nothing(toy, sample):
    image, _, window = sample
    labels = np.asarray(search_text(toy, image, "nothing", window=window,
                                    slices=slice(MID, MID + 1)).labels)
    assert not labels.any()


def test_a_click_or_a_box_on_a_nucleus_gives_that_nucleus(toy, sample):
    image, truth, window = sample
    for n in range(1, 7):
        gt = truth[MID] == n
        click = api.segment(toy, image, points_rc=[_centre(gt)], index=(MID,), window=window)
        assert _iou(click.mask, gt) > 0.7, n
        rr, cc = np.nonzero(gt)
        box = (rr.min() - 3, cc.min() - 3, rr.max() + 3, cc.max() + 3)
        boxed = api.segment(toy, image, box_rc=box, index=(MID,), window=window)
        assert _iou(boxed.mask, gt) > 0.7, n
        assert not (click.mask & (truth[MID] > 0) & ~gt).any(), n  # no other nucleus


def _decode(toy, image, window, points_rc):
    """Each plane point as one click on slice MID: ``(logits (3, h, w), iou (3,), score)``."""
    from napari_sam3_onnx.engine.automatic.generate import decode_clicks

    ref = SliceRef(image, (MID,), window=window)
    emb = SliceEncoder(toy.adapter).embed(ref)
    rows, cols = image.shape[1:]
    in_h, in_w = emb.input_size
    xy = np.array([[c * in_w / cols, r * in_h / rows] for r, c in points_rc], np.float32)
    return [(lg, iou, score) for _, lg, iou, score in decode_clicks(toy.adapter, emb, xy, 8)]


def test_the_decoder_rates_a_whole_nucleus_above_sams_cuts_and_a_cut_one_below(toy, sample):
    from napari_sam3_onnx.engine.automatic import AutoMaskSettings
    from napari_sam3_onnx.engine.automatic.masks import stability_scores

    image, truth, window = sample
    d = AutoMaskSettings()
    nuclei = [_centre(truth[MID] == n) for n in range(1, 7)]
    for n, (logits, iou, score) in enumerate(_decode(toy, image, window, nuclei), start=1):
        stab = stability_scores(logits, d.stability_score_offset)
        best = int(np.argmax(iou))
        assert score > 0 and iou[best] > d.pred_iou_thresh, (n, iou)
        assert stab[best] > d.stability_score_thresh, (n, stab)
        small = (logits[0] > 0).sum() < (logits[best] > 0).sum()  # token 1's radius cuts it
        assert small and iou[0] < d.pred_iou_thresh, (n, iou)
    # a click on the background, far from every nucleus: no object
    (_, _, score), = _decode(toy, image, window, [(2, 2)])
    assert score <= 0


def test_a_negative_exemplar_removes_nuclei_of_its_brightness(toy, sample):
    image, truth, window = sample
    emb = SliceEncoder(toy.adapter).embed(SliceRef(image, (MID,), window=window))
    texts = TextCache(toy.adapter, ClipTokenizer.from_folder(toy.folder))
    every = search_slice(toy.adapter, emb, ["nucleus"], texts)
    rr, cc = np.nonzero(truth[MID] == 3)
    ex = Exemplars(np.array([[rr.min(), cc.min(), rr.max(), cc.max()]], float),
                   np.array([False]))
    fewer = search_slice(toy.adapter, emb, ["nucleus"], texts, exemplars=ex)
    assert len(fewer.instances) < len(every.instances) == 6
    assert not (fewer.labels[truth[MID] == 3]).any()


def test_propagation_from_clicks_on_the_middle_slice_follows_every_nucleus(toy, sample):
    image, truth, window = sample
    seeds = {n: Seed.clicks(MID, [_centre(truth[MID] == n)]) for n in range(1, 7)}
    labels, _result = propagate(toy, image, seeds, window=window)
    for n in range(1, 7):
        for z in range(3, 10):
            assert _iou(labels[z] == n, truth[z] == n) > 0.6, (n, z)


def test_toy_is_built_once_and_reused_from_the_cache(tmp_path, monkeypatch):
    spec = get_bundle("toy")
    module = local_builder(spec)
    calls = []
    real = module.build
    monkeypatch.setattr(module, "build", lambda folder: calls.append(folder) or real(folder))
    first = api.open_bundle("toy", root=tmp_path).folder
    second = api.open_bundle("toy", root=tmp_path).folder
    assert first == second and len(calls) == 1
    assert first.parent == tmp_path / "models" / "toy"
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp folder left
    assert first.name == module.definition_digest()[:local_bundles.DIGEST_CHARS]


def test_a_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    spec = get_bundle("toy")
    module = local_builder(spec)

    def broken(folder):
        (folder / "half.onnx").write_bytes(b"x")
        raise OSError("disk full")

    monkeypatch.setattr(module, "build", broken)
    with pytest.raises(Sam3OnnxError, match="disk full"):
        local_bundles.build_local_bundle(spec, module, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_changed_definition_gets_a_new_folder_and_the_old_build_goes(tmp_path, monkeypatch):
    spec = get_bundle("toy")
    module = local_builder(spec)
    old = local_bundles.build_local_bundle(spec, module, tmp_path)
    monkeypatch.setattr(module, "definition_digest", lambda: "f" * 64)
    new = local_bundles.build_local_bundle(spec, module, tmp_path)
    assert new != old and new.is_dir() and not old.exists()


def test_the_toy_is_built_from_the_production_toy_package_by_a_plain_import():
    from napari_sam3_onnx.toy import bundle

    assert local_builder(get_bundle("toy")) is bundle


def test_download_refuses_a_bundle_built_here_and_names_the_fetch_that_builds_it(tmp_path):
    from napari_sam3_onnx.models.download import download_bundle
    from napari_sam3_onnx.models.errors import DownloadError

    with pytest.raises(DownloadError, match="fetch_bundle"):
        download_bundle(get_bundle("toy"), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_every_entry_built_here_names_a_builder_the_workflows_know():
    from napari_sam3_onnx.models.registry import KNOWN_BUNDLES

    built = [b for b in KNOWN_BUNDLES if b.builder]
    assert built and all(local_builder(b).definition_digest() for b in built)


def test_an_unknown_builder_name_is_refused():
    import dataclasses

    with pytest.raises(ValueError, match="unknown builder 'nope'"):
        local_builder(dataclasses.replace(get_bundle("toy"), builder="nope"))
