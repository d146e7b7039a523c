"""SAM 3's CLIP BPE tokenizer on the ``tokenizers`` library (no PyTorch, no ftfy).

SAM 3 uses OpenAI CLIP's byte-level BPE (49,408 ids; start 49406, end 49407; context 32)
(docs/layouts.md#text-tokens). The vocabulary is built from the merges file
``bpe_simple_vocab_16e6.txt.gz`` as CLIP does: the 256 byte symbols, the same with ``</w>``, one
token per merge, then the two specials. A Hugging Face ``tokenizer.json`` or a
``vocab.json`` + ``merges.txt`` pair of the same tokenizer work as well.

Text is cleaned like upstream (HTML entities unescaped, whitespace collapsed, lower-cased);
upstream's ``ftfy`` mojibake repair is not applied (NFC normalisation instead).
"""

from __future__ import annotations

import gzip
import html
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from napari_sam3_onnx.models.errors import (
    BundleFileError,
    ModelFileMissingError,
    ModelFileUnreadableError,
    PromptError,
)
from napari_sam3_onnx.models.header_cache import HeaderCache

START = "<|startoftext|>"
END = "<|endoftext|>"
#: CLIP's word pattern (contractions, letters, single digits, other symbols).
WORD_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"
#: Names of tokenizer files looked for in a bundle folder, in order of preference.
TOKENIZER_FILES = ("tokenizer.json", "bpe_simple_vocab_16e6.txt.gz", "merges.txt")


def bytes_to_unicode() -> dict[int, str]:
    """CLIP/GPT-2's reversible map from the 256 byte values to printable characters."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars), strict=True))


def _merge_lines(text: str, limit: int | None) -> list[tuple[str, str]]:
    """The first ``limit`` merges (all: None) of a merges file's ``text``.

    The first line is a version header. Lines past the ``limit``-th merge are not split at
    all: CLIP's file has 262,144 lines and uses 48,894.
    """
    merges: list[tuple[str, str]] = []
    rest = text.split("\n", 1)[1] if "\n" in text else ""
    while rest and (limit is None or len(merges) < limit):
        want = None if limit is None else limit - len(merges)
        lines = rest.split("\n", -1 if want is None else want)
        rest = lines.pop() if want is not None and len(lines) > want else ""
        for line in lines:
            parts = line.split()
            if len(parts) == 2:
                merges.append((parts[0], parts[1]))
    return merges


def _read_merges(path: Path, limit: int | None = None) -> list[tuple[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return _merge_lines(f.read(), limit)


def _built_from_merges(path: Path, f: BinaryIO, _size: int) -> Tokenizer:
    """CLIP's tokenizer from the merges file open as ``f`` (``path`` names it)."""
    data = gzip.GzipFile(fileobj=f).read() if path.suffix == ".gz" else f.read()
    text = data.decode("utf-8")
    if "\r" in text:  # universal newlines, as a text-mode read gives
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return build_clip_tokenizer(_merge_lines(text, CLIP_MERGES))


#: CLIP tokenizers built from a merges file, by the file's identity: reopening a bundle (another
#: device, the dock closed and opened) does not build its 49,408-token BPE again. A
#: ``tokenizers.Tokenizer`` is only read from (encode, decode), so one is shared.
BUILT: HeaderCache[Tokenizer] = HeaderCache(entries=4)


#: The merges CLIP keeps (49,152 - 256 - 2), which gives 49,408 ids.
CLIP_MERGES = 48894


def build_clip_tokenizer(
    merges: list[tuple[str, str]], max_merges: int | None = CLIP_MERGES
) -> Tokenizer:
    """Build CLIP's BPE tokenizer from its merge list.

    Parameters
    ----------
    merges : list of (str, str)
        BPE merges in priority order (the lines of ``bpe_simple_vocab_16e6.txt.gz``).
    max_merges : int or None
        CLIP keeps the first 48,894 merges (49,152 - 256 - 2), which gives 49,408 ids.
    """
    merges = merges[:max_merges] if max_merges else merges
    base = list(bytes_to_unicode().values())
    vocab_list = base + [b + "</w>" for b in base] + ["".join(m) for m in merges] + [START, END]
    vocab = {tok: i for i, tok in enumerate(vocab_list)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Replace("</w>", " ")])
    tok.add_special_tokens([START, END])
    return tok


@dataclass
class ClipTokenizer:
    """Text -> SAM 3 token ids (with start and end tokens), at most ``context_length`` long."""

    tokenizer: Tokenizer
    context_length: int = 32

    @classmethod
    def from_file(cls, path: Path | str, context_length: int = 32) -> ClipTokenizer:
        """Load from ``tokenizer.json``, ``bpe_simple_vocab_16e6.txt.gz`` or ``merges.txt``."""
        path = Path(path)
        if not path.is_file():
            raise ModelFileMissingError(path, "SAM 3's text prompts need CLIP's BPE vocabulary.")
        try:
            with open(path, "rb") as fh:  # tokenizers calls a refused read "damaged" otherwise
                fh.read(1)
            return cls._load(path, context_length)
        except PermissionError as exc:
            raise ModelFileUnreadableError(path) from exc
        except (ModelFileMissingError, ModelFileUnreadableError, BundleFileError):
            raise
        except Exception as exc:  # tokenizers' own Exception, JSONDecodeError, gzip errors
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise BundleFileError(path, reason) from exc

    @classmethod
    def _load(cls, path: Path, context_length: int) -> ClipTokenizer:
        if path.suffix == ".json":
            return cls(Tokenizer.from_file(str(path)), context_length)
        if path.name == "merges.txt" and (path.parent / "vocab.json").is_file():
            vocab = json.loads((path.parent / "vocab.json").read_text(encoding="utf-8"))
            merges = _read_merges(path)
            tok = build_clip_tokenizer(merges, max_merges=None)
            if tok.get_vocab_size() != len(vocab):
                raise ValueError("vocab.json does not match merges.txt")
            return cls(tok, context_length)
        return cls(BUILT.get(path, _built_from_merges), context_length)

    @classmethod
    def from_folder(cls, folder: Path | str, context_length: int = 32) -> ClipTokenizer:
        """Find the tokenizer file in a bundle folder."""
        folder = Path(folder)
        for name in TOKENIZER_FILES:
            if (folder / name).is_file():
                return cls.from_file(folder / name, context_length)
        raise ModelFileMissingError(
            folder / TOKENIZER_FILES[1],
            f"Text prompts need CLIP's tokenizer: put one of {', '.join(TOKENIZER_FILES)} "
            "in the bundle folder.",
        )

    @property
    def start_id(self) -> int:
        """Id of the start token (49406 for CLIP)."""
        return self._special_id(START)

    @property
    def end_id(self) -> int:
        """Id of the end token (49407 for CLIP)."""
        return self._special_id(END)

    def _special_id(self, token: str) -> int:
        token_id = self.tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"this CLIP tokenizer has no {token} token")
        return int(token_id)

    @staticmethod
    def clean(text: str) -> str:
        """Upstream's cleaning without ftfy: unescape HTML twice, collapse whitespace, strip."""
        text = html.unescape(html.unescape(text))
        return re.sub(r"\s+", " ", text).strip()

    def encode(self, text: str) -> list[int]:
        """Token ids ``[start, ..., end]`` of one phrase.

        Over-long text is truncated to ``context_length`` with the last id forced to the end
        token, as upstream does, and a warning names how much was cut.

        Raises
        ------
        PromptError
            The text is empty or only whitespace.
        """
        cleaned = self.clean(text)
        if not cleaned:
            raise PromptError("The text prompt is empty; type a noun phrase such as 'nucleus'.")
        body = self.tokenizer.encode(cleaned, add_special_tokens=False).ids
        ids = [self.start_id, *body, self.end_id]
        if len(ids) > self.context_length:
            warnings.warn(
                f"The text prompt {text!r} is {len(ids)} tokens long; SAM 3 reads "
                f"{self.context_length}, so it was cut to "
                f"{self.tokenizer.decode(body[: self.context_length - 2]).strip()!r}.",
                UserWarning,
                stacklevel=2,
            )
            ids = [*ids[: self.context_length - 1], self.end_id]
        return ids
