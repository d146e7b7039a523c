"""Concept search over planes (text and/or exemplar boxes): the one loop every caller shares.

:func:`iter_search` is the search workflow: :func:`~.text.iter_search_text` and
:func:`~.text.search_text` (the API and the CLI's ``text``) and the dock's Text tab all consume
it. It runs over a :class:`~.workspace.Workspace` (encoder and cache, language cache, tiling),
yields one :class:`SearchStep` per plane as it finishes, and stops between planes when the
cancel token says so.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from ..engine.automatic.linking import PlaneLinker
from ..engine.concepts.search import (
    DEFAULT_FLOOR,
    VISUAL,
    Exemplars,
    SliceResult,
    search_slice,
)
from ..engine.encoding import SliceRef
from ..engine.tiling.tiled_search import search_tiled
from ..models.base import Capability
from .automatic import link_result
from .io import InputError
from .workspace import Workspace


@dataclass(frozen=True)
class SearchStep:
    """One finished plane of a search.

    Attributes
    ----------
    index : tuple[int, ...]
        The plane's leading indices.
    result : SliceResult
        Its ``(rows, cols)`` int32 labels and instances (ids unique across the run, or linked
        through the stack with ``link_iou``).
    done, total : int
        Planes finished so far, and planes asked for.
    min_score : float or None
        The score cut the bundle's graph applied itself (None: no detection ran).
    """

    index: tuple[int, ...]
    result: SliceResult
    done: int
    total: int
    min_score: float | None


def check_search(floor: float, min_area: int) -> None:
    """Refuse a floor outside [0, 1] or a negative minimum area (before any work starts)."""
    if not (math.isfinite(float(floor)) and 0.0 <= float(floor) <= 1.0):
        raise InputError(f"floor={floor}: scores lie between 0 and 1.")
    if int(min_area) < 0:
        raise InputError(f"min_area={min_area}: give 0 (keep all) or more pixels.")


def iter_search(
    workspace: Workspace,
    refs: Sequence[SliceRef],
    concepts: Sequence[str],
    *,
    floor: float = DEFAULT_FLOOR,
    exemplars: Mapping[tuple[int, ...], Exemplars] | None = None,
    min_area: int = 0,
    fill_holes: bool = False,
    first_id: int = 1,
    link_iou: float | None = None,
    cancelled: Callable[[], bool] | None = None,
    warn_long: bool = True,
) -> Iterator[SearchStep]:
    """Search each plane of ``refs`` for the concepts; yield each plane as it finishes.

    Parameters
    ----------
    workspace : Workspace
        A model with the ``text`` capability; its encoder (cached planes are not encoded
        again), language cache (the language encoder runs once per phrase, up front) and tiling
        (planes above its threshold are searched tile by tile, on the tiles the Clicks tab
        uses; planes with exemplar boxes are searched whole).
    refs : sequence of SliceRef
        The planes, in order.
    concepts : sequence of str
        Phrases, each its own class; empty: the exemplars alone (SAM 3's "visual" prompt).
    floor : float
        Keep instances scoring above it.
    exemplars : mapping of index to Exemplars, optional
        Exemplar boxes of the planes that have any.
    min_area, fill_holes
        Drop instances with fewer pixels; fill holes inside instances.
    first_id : int
        The first instance id; ids then count up across planes and concepts.
    link_iou : float, optional
        Give an instance the id of the previous plane's instance it overlaps with IoU above
        this (one id per object through z); None: new ids per plane.
    cancelled : callable, optional
        Cancel token, checked before each plane; finished planes have been yielded.
    warn_long : bool
        Let the tokenizer warn about phrases longer than the model reads (the dock has told
        the user already and passes False).

    Raises
    ------
    InputError
        A floor outside [0, 1] or a negative ``min_area``.
    MissingCapabilityError
        The model has no language encoder and concept detector.

    Examples
    --------
    >>> ws = bundle.workspace("nuclei.zarr")                     # bundle = api.open_bundle(...)
    >>> refs = api.refs_along_axis(stack, window=(500, 4000))   # stack: (z, rows, cols)
    >>> for step in api.iter_search(ws, refs, ["nucleus"], floor=0.5):
    ...     out[step.index] = step.result.labels                 # (rows, cols) int32
    """
    check_search(floor, min_area)
    texts = workspace.texts
    encoder = workspace.encoder
    if encoder is None:  # pragma: no cover - a workspace with texts has a model
        raise InputError("Load a model first.")
    exemplars = exemplars or {}
    with warnings.catch_warnings():
        if not warn_long:
            warnings.simplefilter("ignore", UserWarning)
        for phrase in concepts or [VISUAL]:
            texts.get(phrase)
    adapter, phrases, tiling = encoder.adapter, list(concepts), workspace.tiling
    linker = None if link_iou is None else PlaneLinker(link_iou, int(first_id))
    next_id = int(first_id)
    for n, ref in enumerate(refs):
        if cancelled is not None and cancelled():
            return
        index = tuple(ref.index)
        boxes = exemplars.get(index)
        if tiling is not None and boxes is None and phrases:
            embed = partial(encoder.embed, need=Capability.TEXT)
            res = search_tiled(adapter, embed, ref, phrases, texts, tiling, floor, min_area,
                               fill_holes, next_id, index)
        else:
            # exemplar boxes are their own workflow (a per-workflow bundle may grant it
            # another precision than text)
            emb = encoder.embed(ref, Capability.TEXT if boxes is None else Capability.EXEMPLARS)
            res = search_slice(adapter, emb, phrases, texts, floor, boxes, min_area,
                               fill_holes, next_id, index)
        next_id += len(res.instances)
        if linker is not None:  # one id per object through z (the concept is not compared)
            res.labels = link_result(linker, res.labels, res.instances, index)
        yield SearchStep(index, res, n + 1, len(refs), res.min_score)
