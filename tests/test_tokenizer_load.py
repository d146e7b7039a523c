"""Reading CLIP's merges: only the merges used are split, and a built tokenizer is kept by file."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from napari_sam3_onnx.engine.concepts import tokenizer as tk
from napari_sam3_onnx.engine.concepts.tokenizer import (
    CLIP_MERGES,
    ClipTokenizer,
    build_clip_tokenizer,
    bytes_to_unicode,
)
from napari_sam3_onnx.models.header_cache import HeaderCache


def _every_line(text: str) -> list[tuple[str, str]]:
    """The merges as the reader did before: every line split, those of two parts kept."""
    merges = []
    for line in text.split("\n")[1:]:
        parts = line.split()
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
    return merges


@pytest.mark.parametrize("text", [
    "", "#version", "#version\n", "#v\na b", "#v\na b\n", "#v\r\na b\r\nc d\r\n",
    "#v\na b\n\n\nc d\nlonely\ne f g\nh i\n  j   k  \n\n", "#v\n\n\n\n",
])
def test_the_first_merges_are_those_of_a_full_read(text):
    everything = _every_line(text)
    for limit in [None, *range(len(everything) + 3)]:
        want = everything if limit is None else everything[:limit]
        assert tk._merge_lines(text, limit) == want, (text, limit)


def _clip_like(path, extra_lines=2000, blanks_at=(5, 48_000)):
    base = list(bytes_to_unicode().values())
    merges = [(a, b) for a in base for b in base][: CLIP_MERGES + extra_lines]
    lines = [" ".join(m) for m in merges]
    for at in blanks_at:  # lines that are not merges before the 48,894th
        lines.insert(at, "")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(lines) + "\n")
    return merges


def test_clip_file_gives_the_tokenizer_of_every_merge(tmp_path, monkeypatch):
    monkeypatch.setattr(tk, "BUILT", HeaderCache())
    path = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    merges = _clip_like(path)
    ours = ClipTokenizer.from_file(path).tokenizer
    assert json.loads(ours.to_str()) == json.loads(build_clip_tokenizer(merges).to_str())


def test_a_settled_merges_file_is_built_once_and_a_changed_one_again(tmp_path, monkeypatch):
    cache: HeaderCache = HeaderCache(settle_s=0.1)
    monkeypatch.setattr(tk, "BUILT", cache)
    path = tmp_path / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("#version: 0.2\nh e\nl l\nhe ll\n")
    time.sleep(0.2)
    first = ClipTokenizer.from_file(path, context_length=8)
    second = ClipTokenizer.from_file(path, context_length=12)
    assert second.tokenizer is first.tokenizer and second.context_length == 12
    assert cache.hits == 1
    st = path.stat()
    with gzip.open(path, "wt", encoding="utf-8") as f:  # another merge, same mtime
        f.write("#version: 0.2\nh e\nl l\nhe ll\no w\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = ClipTokenizer.from_file(path, context_length=8)
    assert third.tokenizer is not first.tokenizer
    assert third.tokenizer.get_vocab_size() == first.tokenizer.get_vocab_size() + 1
