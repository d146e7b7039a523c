"""A CLIP-shaped BPE ``tokenizer.json`` that gives a few words the toy detector's token ids.

The concept test bundles (:mod:`~napari_sam3_onnx.testing.wkentaro`,
:mod:`~napari_sam3_onnx.testing.samexporter`, :mod:`~napari_sam3_onnx.testing.autognosi`) ship
no tokenizer, and their toy language encoders read token ids, not words
(:mod:`~napari_sam3_onnx.toy.concepts`: id 2000 -> level 0.25 "anything", 4000 -> 0.7
"bright", 3000 -> 0.999 "nothing"; every other id -> 0.25).

:func:`write_toy_tokenizer` builds the tokenizer the product uses
(:func:`~napari_sam3_onnx.engine.concepts.tokenizer.build_clip_tokenizer`: 256 byte symbols, the
same with ``</w>``, one token per merge, then start and end) from a merge list laid out so that

* each word's **final** merge sits at index ``id - 512``, so the whole word is that one token;
* its intermediate merges (left to right over the pieces the earlier merges leave) sit just
  before it;
* every other slot holds a *filler* merge of non-ASCII byte symbols, which no ASCII text ever
  reaches, up to CLIP's 48,894 merges, so start and end are 49406 and 49407 as in CLIP.

Any other ASCII word falls apart into byte tokens (ids below 512), which the toy encoders read
as "anything" (0.25).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from ..engine.concepts.tokenizer import TOKENIZER_FILES, build_clip_tokenizer, bytes_to_unicode
from .concepts import TOKEN_ANY, TOKEN_BRIGHT, TOKEN_NOTHING

#: The words of the default toy tokenizer and the ids the toy detector gives a meaning.
WORDS = {"bright": TOKEN_BRIGHT, "nothing": TOKEN_NOTHING, "thing": TOKEN_ANY}
#: CLIP's merge count: 49,408 ids = 512 byte symbols + 48,894 merges + start + end.
CLIP_MERGES = 48894
BASE = 512
EOW = "</w>"


def _bpe(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Apply ``ranks`` (pair -> priority) to ``symbols`` the way BPE does (lowest rank first)."""
    symbols = list(symbols)
    while len(symbols) > 1:
        pairs = [(ranks.get((a, b)), i) for i, (a, b) in enumerate(pairwise(symbols))]
        best = min((p for p in pairs if p[0] is not None), default=None)
        if best is None:
            break
        i = best[1]
        symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
    return symbols


def _fillers(count: int) -> list[tuple[str, str]]:
    """``count`` distinct merges over the 128 non-ASCII byte symbols (never reached by ASCII)."""
    table = bytes_to_unicode()
    high = [table[b] for b in range(128, 256)]
    out: list[tuple[str, str]] = []
    for a in high:
        out += [(a, b) for b in high]
    out += [(a, b + EOW) for a in high for b in high]
    pairs = [a + b for a in high for b in high]
    for ab in pairs:
        if len(out) >= count:
            break
        out += [(ab, c) for c in high]
    if len(out) < count:
        raise ValueError(f"cannot make {count} filler merges")
    return out[:count]


def toy_merges(words: dict[str, int], total: int = CLIP_MERGES) -> list[tuple[str, str]]:
    """The merge list of :func:`write_toy_tokenizer` (see the module docstring).

    Raises
    ------
    ValueError
        A word is not lower-case ASCII letters, two words want the same id, an id is outside
        ``512 .. 512 + total - 1``, or the intermediate merges of a word do not fit below its id.
    """
    slots: dict[int, tuple[str, str]] = {}
    ranks: dict[tuple[str, str], int] = {}
    for word, token in sorted(words.items(), key=lambda kv: kv[1]):
        if not (word.isascii() and word.isalpha() and word.islower()):
            raise ValueError(f"toy words are lower-case ASCII letters, not {word!r}")
        final = token - BASE
        if not 0 <= final < total or final in slots:
            raise ValueError(f"id {token} for {word!r} is taken or outside the merges")
        pieces = _bpe([*word[:-1], word[-1] + EOW], ranks)
        chain = []
        while len(pieces) > 1:
            chain.append((pieces[0], pieces[1]))
            pieces = [pieces[0] + pieces[1], *pieces[2:]]
        first = final - len(chain) + 1
        if first < 0 or any(i in slots for i in range(first, final + 1)):
            raise ValueError(f"no room for the merges of {word!r} just below id {token}")
        for k, pair in enumerate(chain):
            slots[first + k] = pair
            ranks[pair] = first + k
    fillers = iter(_fillers(total - len(slots)))
    return [slots[i] if i in slots else next(fillers) for i in range(total)]


def write_toy_tokenizer(folder: Path | str, words: dict[str, int] | None = None) -> Path:
    """Write ``tokenizer.json`` into ``folder`` giving each of ``words`` its id.

    Parameters
    ----------
    folder : Path or str
        A bundle folder (created if missing).
    words : dict of str to int, optional
        Lower-case ASCII word -> token id (default :data:`WORDS`).

    Returns
    -------
    Path
        The ``tokenizer.json`` written (what ``ClipTokenizer.from_folder`` looks for first).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = build_clip_tokenizer(toy_merges(dict(WORDS if words is None else words)))
    path = folder / TOKENIZER_FILES[0]
    tok.save(str(path))
    return path

