"""One text-search run of the Text tab: what it needs, and the background loop.

Everything here runs without Qt: :func:`iter_run` is the generator the tab hands to napari's
thread pool (one ``yield`` per finished plane, so napari's progress bar and cancel work per
plane), and tests drive it directly. The engine does the work: planes are embedded through the
shared :class:`~napari_sam3_onnx.engine.encoding.SliceEncoder` (cached planes are not
re-encoded), phrases through the shared :class:`~napari_sam3_onnx.engine.concepts.search.TextCache`
(the language encoder runs once per phrase), and each plane through
:func:`~napari_sam3_onnx.engine.concepts.search.search_slice`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from napari_sam3_onnx.engine.concepts.search import (
    VISUAL,
    Exemplars,
    SliceResult,
    TextCache,
    search_slice,
)
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tiling.tiled_search import search_tiled
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.base import Capability


@dataclass(frozen=True)
class TextRun:
    """Everything one run needs, captured on the Qt thread before it starts.

    Attributes
    ----------
    encoder : SliceEncoder
        The model and the shared embedding cache.
    texts : TextCache
        The shared language-encoder cache of this model.
    refs : sequence of SliceRef
        The planes, in order.
    concepts : sequence of str
        Phrases (each its own class); empty = exemplars only (SAM 3's "visual").
    floor : float
        Keep instances scoring above it.
    exemplars : mapping of index to Exemplars
        Exemplar boxes of the planes that have any.
    min_area : int
        Drop instances with fewer pixels.
    fill_holes : bool
        Fill holes inside each instance.
    first_id : int
        The first instance id; ids then count up across planes and concepts.
    tiling : TileSettings or None
        The Clicks tab's "tile large planes" setting: planes above its threshold are searched
        tile by tile, on the same tiles (and cached embeddings) the Clicks tab uses. Planes
        with exemplar boxes are searched whole.
    """

    encoder: SliceEncoder
    texts: TextCache
    refs: Sequence[SliceRef]
    concepts: Sequence[str]
    floor: float = 0.5
    exemplars: Mapping[tuple[int, ...], Exemplars] = field(default_factory=dict)
    min_area: int = 0
    fill_holes: bool = False
    first_id: int = 1
    tiling: TileSettings | None = None


@dataclass(frozen=True)
class SliceDone:
    """One finished plane.

    Attributes
    ----------
    index : tuple[int, ...]
        The plane.
    result : SliceResult
        Its labels and instances (ids already unique across the run).
    done, total : int
        Planes finished so far and planes in the run.
    min_score : float or None
        The score cut the bundle's graph applied itself (None: no detection was run).
    """

    index: tuple[int, ...]
    result: SliceResult
    done: int
    total: int
    min_score: float | None


def iter_run(run: TextRun, cancel: threading.Event | None = None) -> Iterator[SliceDone]:
    """Search the run's planes one by one; stops before the next plane once ``cancel`` is set.

    The language encoder runs first, once per phrase (long prompts are cut with a warning the
    tab has already shown), then each plane is embedded (from the cache when possible) and
    searched. Yields one :class:`SliceDone` per plane.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for phrase in run.concepts or [VISUAL]:
            run.texts.get(phrase)
    next_id = run.first_id
    total = len(run.refs)
    for n, ref in enumerate(run.refs):
        if cancel is not None and cancel.is_set():
            return
        result = _search_plane(run, ref, next_id)
        next_id += len(result.instances)
        yield SliceDone(tuple(ref.index), result, n + 1, total, result.min_score)


class RunControl:
    """How a running search is stopped (kept apart from the tab so teardown holds no widget).

    Attributes
    ----------
    cancel : threading.Event
        Set to stop before the next plane.
    worker : napari.qt.threading.GeneratorWorker or None
        The worker running :func:`iter_run`.
    """

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.worker = None

    def stop(self) -> None:
        """Ask the run to stop after the plane in progress."""
        self.cancel.set()
        if self.worker is not None:
            self.worker.quit()


def _search_plane(run: TextRun, ref: SliceRef, first_id: int) -> SliceResult:
    """One plane: tiled when the run tiles (and the plane has no exemplars), else whole.

    Embeddings come from the shared encoder (single-flight: another tab's encode of the same
    plane or tile is waited for, never repeated).
    """
    exemplars = run.exemplars.get(tuple(ref.index))
    adapter, phrases = run.encoder.adapter, list(run.concepts)
    if run.tiling is not None and exemplars is None and phrases:
        embed = partial(run.encoder.embed, need=Capability.TEXT)
        return search_tiled(adapter, embed, ref, phrases, run.texts, run.tiling, run.floor,
                            run.min_area, run.fill_holes, first_id, tuple(ref.index))
    embedding = run.encoder.embed(ref, Capability.TEXT)
    return search_slice(
        adapter, embedding, phrases, run.texts, floor=run.floor, exemplars=exemplars,
        min_area=run.min_area, fill_holes=run.fill_holes, first_id=first_id,
        index=tuple(ref.index),
    )
