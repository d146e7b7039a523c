"""The toy CLIP-shaped tokenizer of the concept test bundles: ids, layout, end to end."""

import json

import numpy as np
import pytest

from napari_sam3_onnx.engine.concepts.search import TextCache, search_slice
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.concepts import EOT, SOT, TOKEN_ANY, TOKEN_BRIGHT, TOKEN_NOTHING
from napari_sam3_onnx.testing.scenes import BLOBS, SPECK, planted_image
from napari_sam3_onnx.testing.tokenizer import (
    CLIP_MERGES,
    build_text_bundle,
    toy_merges,
    write_toy_tokenizer,
)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toytok")
    path = write_toy_tokenizer(folder)
    assert path.name == "tokenizer.json"
    return ClipTokenizer.from_folder(folder)


def test_words_get_their_ids_and_specials_are_clip_ones(tok):
    assert tok.encode("bright") == [SOT, TOKEN_BRIGHT, EOT]
    assert tok.encode("nothing") == [SOT, TOKEN_NOTHING, EOT]
    assert tok.encode("thing") == [SOT, TOKEN_ANY, EOT]
    assert (tok.start_id, tok.end_id) == (49406, 49407)
    assert tok.tokenizer.get_vocab_size() == 49408
    # cleaned like upstream: case and spaces do not matter
    assert tok.encode("  BRIGHT ") == [SOT, TOKEN_BRIGHT, EOT]


def test_other_words_fall_apart_into_byte_tokens(tok):
    ids = tok.encode("nucleus")
    assert ids[0] == SOT and ids[-1] == EOT and all(i < 512 for i in ids[1:-1])
    # "nothing" contains "thing": the longer word still gets its own single id
    assert tok.encode("thing nothing bright") == [SOT, TOKEN_ANY, TOKEN_NOTHING, TOKEN_BRIGHT, EOT]


def test_merge_layout(tmp_path):
    merges = toy_merges({"bright": 4000, "cell": 700})
    assert len(merges) == CLIP_MERGES
    assert "".join(merges[4000 - 512]) == "bright</w>"
    assert "".join(merges[700 - 512]) == "cell</w>"
    ascii_slots = [i for i, m in enumerate(merges) if m[0].isascii()]
    # c+e, ce+l, cel+l</w>; then b+r ... brigh+t</w>, each chain ending at its id
    assert ascii_slots == [*range(186, 189), *range(3484, 3489)]
    assert len({"".join(m) for m in merges}) == CLIP_MERGES  # every merge makes a new token
    write_toy_tokenizer(tmp_path, {"bright": 4000, "cell": 700})
    tok = ClipTokenizer.from_folder(tmp_path)
    assert tok.encode("cell bright") == [SOT, 700, 4000, EOT]
    saved = json.loads((tmp_path / "tokenizer.json").read_text())
    assert len(saved["model"]["merges"]) == CLIP_MERGES


@pytest.mark.parametrize("words", [{"Bright": 4000}, {"a": 300}, {"x": 60000},
                                   {"ab": 1000, "cd": 1000}])
def test_bad_words_are_refused(words):
    with pytest.raises(ValueError):
        toy_merges(words)


@pytest.mark.parametrize("layout", ["wkentaro-v0.3", "samexporter"])
def test_bundle_with_tokenizer_finds_words_meaning(tmp_path, layout):
    folder = build_text_bundle(tmp_path / layout, layout)
    adapter = open_adapter(folder)
    texts = TextCache(adapter, ClipTokenizer.from_folder(folder))
    emb = adapter.encode(planted_image((60, 90)))
    found = {}
    for phrase in ("bright", "nucleus", "nothing"):
        res = search_slice(adapter, emb, [phrase], texts)
        found[phrase] = {b.name for b in BLOBS
                         if res.labels[(b.r0 + b.r1) // 2, (b.c0 + b.c1) // 2] > 0}
    assert found["bright"] == {"bright_top_left", "bright_right"}
    assert found["nucleus"] == {"bright_top_left", "bright_right", "mid_centre"}
    assert found["nothing"] == set()
    assert texts.calls == 3
    # the speck scores about 0.15: raw heads let a low floor keep it, the baked cut never does
    low = search_slice(adapter, emb, ["thing"], texts, floor=0.1)
    speck = low.labels[SPECK.r0:SPECK.r1, SPECK.c0:SPECK.c1]
    assert np.any(speck > 0) == (layout == "samexporter")
