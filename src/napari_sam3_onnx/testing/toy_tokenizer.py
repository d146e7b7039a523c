"""A word-level ``tokenizer.json`` that maps a few words onto the toy detector's token ids.

The concept test bundles (:mod:`~napari_sam3_onnx.testing.wkentaro`,
:mod:`~napari_sam3_onnx.testing.samexporter`) ship no tokenizer, and their toy language encoder
reads token ids, not words (:mod:`~napari_sam3_onnx.testing.concepts`). Writing this file into
such a bundle lets end-to-end tests type phrases: ``"nucleus"`` finds every blob brighter than
0.25 (``TOKEN_ANY``), ``"bright"`` only those brighter than 0.7 (``TOKEN_BRIGHT``) and
``"nothing"`` none (``TOKEN_NOTHING``). Other words map to id 1, which behaves like ``"nucleus"``.
"""

from __future__ import annotations

from pathlib import Path

from .concepts import EOT, SOT, TOKEN_ANY, TOKEN_BRIGHT, TOKEN_NOTHING

WORDS = {"nucleus": TOKEN_ANY, "bright": TOKEN_BRIGHT, "nothing": TOKEN_NOTHING}


def write_toy_tokenizer(folder: Path | str, words: dict[str, int] | None = None) -> Path:
    """Write ``tokenizer.json`` (lower-cased, whitespace-split words) into ``folder``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 1, **(words or WORDS), "<|startoftext|>": SOT, "<|endoftext|>": EOT}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|startoftext|>", "<|endoftext|>"])
    path = Path(folder) / "tokenizer.json"
    tok.save(str(path))
    return path
