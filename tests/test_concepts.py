"""Concept search logic on a numpy stand-in detector whose answers are planted."""

import gzip

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.api.text import iter_search_text
from napari_sam3_onnx.engine.concepts.search import (
    Exemplars,
    TextCache,
    parse_concepts,
    search_slice,
)
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.models.base import (
    Detections,
    Embedding,
    SamAdapter,
    TextEmbedding,
)
from napari_sam3_onnx.models.errors import PromptError

SHAPE = (30, 50)  # rows, cols of the slice
LOW = (10, 10)  # low-res mask grid


class PlantedDetector(SamAdapter):
    """Returns, for phrase p, the boxes planted under p with the planted scores.

    It is its own concept-detector role (a test double; real layouts compose role objects).
    """

    layout = "planted"
    max_exemplars = None
    min_score = 0.0

    def __init__(self, planted):
        self._attach_detector(self, exemplars=True)  # text, exemplars
        self.planted = planted  # phrase -> list of (score, (x0, y0, x1, y1) normalised)
        self.text_calls = []
        self.detect_calls = []

    @property
    def context_length(self):
        return 32

    def encode(self, rgb):
        self.encodes = getattr(self, "encodes", 0) + 1
        return Embedding({}, (8, 8), rgb.shape[:2])

    def encode_text(self, token_ids):
        self.text_calls.append(list(token_ids))
        return TextEmbedding(str(token_ids), {"ids": np.asarray(token_ids)})

    def detect(self, embedding, text, boxes_cxcywh=None, box_labels=None):
        self.detect_calls.append((text, boxes_cxcywh, box_labels))
        phrase = _PHRASE[tuple(text.features["ids"][1:-1])]
        rows = self.planted.get(phrase, [])
        masks = np.zeros((len(rows), *LOW), np.float32) - 5
        for i, (_, (x0, y0, x1, y1)) in enumerate(rows):
            masks[i, int(y0 * LOW[0]):int(np.ceil(y1 * LOW[0])),
                  int(x0 * LOW[1]):int(np.ceil(x1 * LOW[1]))] = 5
        return Detections(
            np.array([s for s, _ in rows], np.float32).reshape(-1),
            np.array([b for _, b in rows], np.float32).reshape(-1, 4), masks, "logits",
        )


_PHRASE = {}


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("#version\n")
    tok = ClipTokenizer.from_file(path)
    for phrase in ("nucleus", "cell", "visual"):
        _PHRASE[tuple(tok.encode(phrase)[1:-1])] = phrase
    return tok


EMB = Embedding({}, (8, 8), SHAPE)


def test_instances_ids_scores_and_floor(tokenizer):
    det = PlantedDetector({"nucleus": [(0.9, (0.0, 0.0, 0.2, 0.3)), (0.7, (0.6, 0.5, 0.8, 0.9)),
                                       (0.4, (0.3, 0.0, 0.5, 0.2))]})
    res = search_slice(det, EMB, ["nucleus"], TextCache(det, tokenizer), floor=0.5, first_id=5)
    assert [i.id for i in res.instances] == [5, 6]
    assert [round(i.score, 2) for i in res.instances] == [0.9, 0.7]
    assert set(np.unique(res.labels)) == {0, 5, 6}
    # id 5 covers rows 0..9 (0.3 of 30), cols 0..9 (0.2 of 50): the top-left corner, not bottom
    assert res.labels[2, 3] == 5 and res.labels[25, 35] == 6 and res.labels[2, 20] == 0
    lower = search_slice(det, EMB, ["nucleus"], TextCache(det, tokenizer), floor=0.3)
    assert len(lower.instances) == 3


def test_overlaps_go_to_the_higher_score_and_concepts_get_disjoint_ids(tokenizer):
    det = PlantedDetector({"nucleus": [(0.6, (0.0, 0.0, 0.6, 0.6))],
                           "cell": [(0.95, (0.4, 0.4, 1.0, 1.0))]})
    res = search_slice(det, EMB, ["nucleus", "cell"], TextCache(det, tokenizer))
    by_concept = {i.concept: i for i in res.instances}
    assert by_concept["cell"].id == 1 and by_concept["nucleus"].id == 2
    assert res.labels[15, 25] == 1  # contested pixel -> the 0.95 instance
    assert by_concept["nucleus"].area == int((res.labels == 2).sum())


def test_min_area_drops_small_instances(tokenizer):
    det = PlantedDetector({"nucleus": [(0.9, (0.0, 0.0, 0.1, 0.1)), (0.8, (0.5, 0.5, 1.0, 1.0))]})
    res = search_slice(det, EMB, ["nucleus"], TextCache(det, tokenizer), min_area=40)
    assert [i.id for i in res.instances] == [1] and res.instances[0].area > 40


def test_language_encoder_runs_once_per_phrase_over_a_stack(tokenizer, tmp_path):
    det = PlantedDetector({"nucleus": [(0.9, (0.0, 0.0, 0.2, 0.3))]})
    bundle = api.Bundle(det, tmp_path)  # the tokenizer fixture wrote its vocabulary there
    seen = []
    out = list(iter_search_text(bundle, np.zeros((10, *SHAPE), np.uint8), ["nucleus"],
                                progress=lambda d, t: seen.append((d, t))))
    assert bundle.texts.calls == 1 and len(det.text_calls) == 1 and len(det.detect_calls) == 10
    assert [idx for idx, _ in out] == [(z,) for z in range(10)] and det.encodes == 10
    assert [r.instances[0].id for _, r in out] == list(range(1, 11))
    assert seen[-1] == (10, 10)


def test_cancel_keeps_finished_slices(tokenizer, tmp_path):
    det = PlantedDetector({"nucleus": [(0.9, (0.0, 0.0, 0.2, 0.3))]})
    bundle = api.Bundle(det, tmp_path)
    out = list(iter_search_text(bundle, np.zeros((10, *SHAPE), np.uint8), ["nucleus"],
                                cancelled=lambda: len(det.detect_calls) >= 4))
    assert [idx for idx, _ in out] == [(0,), (1,), (2,), (3,)] and det.encodes == 4


class CutDetector(PlantedDetector):
    """A graph that applies its own score cut (as wkentaro's exports do at 0.5)."""

    def detect(self, embedding, text, boxes_cxcywh=None, box_labels=None):
        det = super().detect(embedding, text, boxes_cxcywh, box_labels)
        keep = det.scores > 0.6
        return Detections(det.scores[keep], det.boxes[keep], det.masks[keep], "logits", 0.6)


def test_results_carry_the_graphs_own_score_cut(tokenizer):
    planted = {"nucleus": [(0.9, (0.0, 0.0, 0.2, 0.3)), (0.55, (0.5, 0.5, 0.7, 0.9))]}
    raw, cut = PlantedDetector(planted), CutDetector(planted)
    low = search_slice(raw, EMB, ["nucleus"], TextCache(raw, tokenizer), floor=0.3)
    assert low.min_score == 0.0 and len(low.instances) == 2
    high = search_slice(cut, EMB, ["nucleus", "cell"], TextCache(cut, tokenizer), floor=0.3)
    assert high.min_score == 0.6 and [i.score for i in high.instances] == [pytest.approx(0.9)]


def test_exemplars_become_cxcywh_with_labels(tokenizer):
    det = PlantedDetector({"visual": [(0.9, (0.0, 0.0, 0.2, 0.3))]})
    ex = Exemplars(np.array([[20, 40, 5, 10]]), np.array([False]))
    search_slice(det, EMB, [], TextCache(det, tokenizer), exemplars=ex)
    _, boxes, labels = det.detect_calls[0]
    np.testing.assert_allclose(boxes, [[25 / 50, 12.5 / 30, 30 / 50, 15 / 30]], rtol=1e-6)
    assert labels.tolist() == [0]
    with pytest.raises(PromptError, match="no area"):
        search_slice(det, EMB, [], TextCache(det, tokenizer),
                     exemplars=Exemplars(np.array([[5, 5, 5, 40]]), np.array([True])))


def test_parse_concepts():
    assert parse_concepts(" nucleus,  mitochondrion ,, Nucleus ") == ["nucleus", "mitochondrion"]
    with pytest.raises(PromptError):
        parse_concepts(" , ")
