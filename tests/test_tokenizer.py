"""The CLIP BPE tokenizer, on a tiny merges file the test writes itself."""

import gzip

import pytest

from napari_sam3_onnx.engine.concepts.tokenizer import (
    ClipTokenizer,
    build_clip_tokenizer,
    bytes_to_unicode,
)
from napari_sam3_onnx.models.errors import ModelFileMissingError, PromptError

MERGES = [("n", "u"), ("nu", "c"), ("l", "e"), ("u", "s</w>"), ("nuc", "le"), ("nucle", "us</w>")]


@pytest.fixture
def tok(tmp_path):
    path = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in MERGES) + "\n")
    return ClipTokenizer.from_file(path, context_length=8)


def test_byte_map_is_a_bijection_onto_printables():
    m = bytes_to_unicode()
    assert len(m) == 256 and len(set(m.values())) == 256
    assert m[ord("a")] == "a" and all(c.isprintable() for c in m.values())


def test_vocabulary_layout_like_clip(tok):
    # 256 bytes + 256 with </w> + merges + 2 specials
    assert tok.tokenizer.get_vocab_size() == 512 + len(MERGES) + 2
    assert (tok.start_id, tok.end_id) == (512 + len(MERGES), 513 + len(MERGES))


def test_merges_apply_and_text_is_cleaned(tok):
    nucleus = tok.tokenizer.token_to_id("nucleus</w>")
    assert nucleus == 512 + len(MERGES) - 1
    assert tok.encode("nucleus") == [tok.start_id, nucleus, tok.end_id]
    assert tok.encode("  NUCLEUS\t") == tok.encode("nucleus")
    # unmerged word: one id per byte, the last one carrying </w>
    v = tok.tokenizer.get_vocab()
    assert tok.encode("ab") == [tok.start_id, v["a"], v["b</w>"], tok.end_id]


def test_non_ascii_text_is_byte_encoded(tok):
    ids = tok.encode("é")
    assert len(ids) == 4  # two UTF-8 bytes + start + end
    assert tok.tokenizer.decode(ids[1:-1]).strip() == "é"


def test_empty_and_long_prompts(tok):
    with pytest.raises(PromptError, match="empty"):
        tok.encode("   \n")
    with pytest.warns(UserWarning, match="cut"):
        ids = tok.encode("nucleus " * 20)
    assert len(ids) == 8 and ids[-1] == tok.end_id and ids[0] == tok.start_id


def test_missing_vocabulary_says_what_to_do(tmp_path):
    with pytest.raises(ModelFileMissingError, match="tokenizer"):
        ClipTokenizer.from_folder(tmp_path)


def test_clip_vocab_size_with_full_merge_count():
    base = list(bytes_to_unicode().values())
    merges = [(a, b) for a in base for b in base][: 48894 + 10]
    assert build_clip_tokenizer(merges).get_vocab_size() == 49408
