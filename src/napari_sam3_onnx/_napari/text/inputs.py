"""Reading a Text-tab run's inputs: phrases, slices, exemplar boxes and their polarity.

Plain functions over strings, indices and napari layers (no Qt), tested without a viewer.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from napari_sam3_onnx._napari.clicks import prompts
from napari_sam3_onnx._napari.layers import index_label
from napari_sam3_onnx.engine.concepts.search import Exemplars, parse_concepts
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.models.errors import PromptError

#: Shapes-layer feature holding each rectangle's exemplar polarity (True = positive).
EXEMPLAR = "exemplar_positive"
SCOPES = ("current", "all", "range")
POSITIVE_EDGE, NEGATIVE_EDGE = "yellow", "magenta"


def scope_indices(
    lead_shape: Sequence[int],
    current: Sequence[int],
    mode: str,
    axis: int = 0,
    lo: int = 0,
    hi: int | None = None,
) -> list[tuple[int, ...]]:
    """The plane indices a run covers.

    Parameters
    ----------
    lead_shape : Sequence[int]
        Sizes of the image's leading (non-displayed) axes: ``()`` for 2-D, ``(nz,)`` for 3-D,
        ``(nt, nz)`` for 4-D.
    current : Sequence[int]
        The plane the viewer shows (one index per leading axis).
    mode : {"current", "all", "range"}
        Only the current plane; every plane along ``axis``; planes ``lo..hi`` (inclusive)
        along ``axis``. The other leading axes stay at ``current``.
    axis : int
        The leading axis to run along (0 = the first non-displayed axis).
    lo, hi : int
        The range for ``"range"`` (clipped to the axis; ``hi`` None = the last plane).

    Raises
    ------
    PromptError
        Unknown mode, an axis the image does not have, or an empty range.
    """
    current = tuple(int(i) for i in current)
    if mode not in SCOPES:
        raise PromptError(f"Unknown scope {mode!r}; choose one of {', '.join(SCOPES)}.")
    if mode == "current" or not lead_shape:
        return [current]
    if not 0 <= axis < len(lead_shape):
        raise PromptError(f"The image has no leading axis {axis} to search along.")
    n = int(lead_shape[axis])
    first, last = (0, n - 1) if mode == "all" else (max(int(lo), 0),
                                                     min(n - 1 if hi is None else int(hi), n - 1))
    if first > last:
        raise PromptError(f"The slice range {lo}..{hi} holds no slice of the {n} along this axis.")
    return [(*current[:axis], k, *current[axis + 1:]) for k in range(first, last + 1)]


def phrases(text: str, have_exemplars: bool = False) -> list[str]:
    """The field's phrases; ``[]`` (SAM 3's "visual") when it is empty but exemplars are drawn.

    Raises
    ------
    PromptError
        No phrase and no exemplar.
    """
    try:
        return parse_concepts(text)
    except PromptError:
        if have_exemplars:
            return []
        raise


def long_prompt_warnings(tokenizer: ClipTokenizer, concepts: Sequence[str]) -> list[str]:
    """Messages for phrases longer than the language encoder reads (they are cut, not refused)."""
    out = []
    for phrase in concepts:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tokenizer.encode(phrase)
        out += [str(w.message) for w in caught]
    return out


def plane_exemplars(shapes, image, indices: Sequence[tuple[int, ...]],
                    slots: int | None) -> dict[tuple[int, ...], Exemplars]:
    """Exemplars of each plane that has rectangles (each box steers its own plane only).

    Raises
    ------
    PromptError
        A plane holds more boxes than the detector has exemplar slots.
    """
    found = {}
    for index in indices:
        ex = read_exemplars(shapes, image, index)
        if ex is None:
            continue
        if slots is not None and len(ex.boxes_rc) > slots:
            raise PromptError(
                f"This bundle takes at most {slots} exemplar box(es) per slice; "
                f"{len(ex.boxes_rc)} are drawn on {index_label(image, index)}.")
        found[tuple(index)] = ex
    return found


def read_exemplars(shapes, image, index: tuple[int, ...]) -> Exemplars | None:
    """The rectangles of ``shapes`` on plane ``index`` as exemplars (None: there are none).

    Polarity comes from the :data:`EXEMPLAR` feature; rectangles drawn without it are positive.
    """
    boxes, rows, _other = prompts.read_boxes(shapes, image, index)
    if not boxes:
        return None
    if EXEMPLAR in shapes.features:
        positive = np.asarray(shapes.features[EXEMPLAR], bool)[rows]
    else:
        positive = np.ones(len(boxes), bool)
    return Exemplars(np.asarray(boxes, np.float64), positive)


def set_exemplar_polarity(shapes, positive: bool) -> None:
    """Make the next rectangles drawn in ``shapes`` positive or negative exemplars.

    Polarity is the :data:`EXEMPLAR` feature (rectangles drawn before it existed count as
    positive); negative ones are drawn in :data:`NEGATIVE_EDGE`.
    """
    if EXEMPLAR not in shapes.features:
        table = shapes.features.copy()
        table[EXEMPLAR] = np.ones(len(table), bool)
        shapes.features = table
    defaults = shapes.feature_defaults
    defaults[EXEMPLAR] = bool(positive)
    shapes.feature_defaults = defaults
    shapes.current_edge_color = POSITIVE_EDGE if positive else NEGATIVE_EDGE
