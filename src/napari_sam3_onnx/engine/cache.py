"""A bounded, least-recently-used cache of slice embeddings.

Encoding is the expensive step (seconds per slice on a CPU); every later prompt on a slice must
reuse the embedding. The key names everything that changes what the model saw: the layer, its
data version, the slice index, the contrast window and the model.

The cache is single-flight per key: while one thread computes a key, every other thread asking
for that key waits for its result instead of encoding the plane again; different keys compute
concurrently. If the computation fails, its caller gets the exception and the waiters try again
themselves (one of them computes, the others wait on it), so nobody gets an error from someone
else's run and a transient failure (a cancelled or out-of-memory encode) costs no result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from napari_sam3_onnx.models.base import Embedding

#: Default budget: about 40 slices of the tracker pair's 21 MB embeddings.
DEFAULT_BUDGET_BYTES = 1 << 30


@dataclass(frozen=True)
class SliceKey:
    """What makes one cached embedding valid.

    Attributes
    ----------
    source : Hashable
        The image (e.g. the layer's id or a file path).
    data_version : Hashable
        Changes whenever the data changes (a counter or a content fingerprint).
    index : tuple[int, ...]
        Indices of the non-displayed axes (``()`` for 2-D data).
    window : tuple[float, float] | None
        Contrast limits the slice was mapped through (None for raw uint8/RGB).
    model : Hashable
        The bundle (and precision) that encoded it.
    region : tuple | None
        A sub-region (tile or field of view) in slice pixels, None for the whole slice.
    """

    source: Hashable
    data_version: Hashable
    index: tuple[int, ...]
    window: tuple[float, float] | None
    model: Hashable
    region: tuple | None = None


class _Flight:
    """One computation in progress; waiters block on ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Embedding | None = None


class EmbeddingCache:
    """LRU cache of :class:`~napari_sam3_onnx.models.base.Embedding` bounded by bytes.

    Thread-safe and single-flight per key (:meth:`get_or_compute`): the widget encodes in worker
    threads and prompts on the Qt thread, and two tabs asking for one plane encode it once.

    Parameters
    ----------
    budget_bytes : int
        Upper bound on the bytes held; least recently used entries are evicted first. One entry
        larger than the budget is still kept alone (the current slice must work).
    """

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self._budget = int(budget_bytes)
        self._items: OrderedDict[SliceKey, Embedding] = OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()
        self._flights: dict[SliceKey, _Flight] = {}
        self.hits = 0
        self.misses = 0

    @property
    def budget_bytes(self) -> int:
        """The byte budget."""
        return self._budget

    @budget_bytes.setter
    def budget_bytes(self, value: int) -> None:
        with self._lock:
            self._budget = int(value)
            self._evict()

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: SliceKey) -> bool:
        with self._lock:
            return key in self._items

    def get(self, key: SliceKey) -> Embedding | None:
        """The cached embedding (marked most recently used), or None."""
        with self._lock:
            emb = self._items.get(key)
            if emb is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return emb

    def put(self, key: SliceKey, embedding: Embedding) -> None:
        """Store ``embedding`` under ``key`` and evict old entries beyond the budget."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[key] = embedding
            self._bytes += embedding.nbytes
            self._evict()

    def get_or_compute(self, key: SliceKey, compute: Callable[[], Embedding]) -> Embedding:
        """Return the cached embedding or compute, store and return it, once per key.

        The computation runs outside the lock, so a slow encode never blocks readers of other
        keys; a second caller of the same key waits for the first one's result (and counts as
        a hit). When ``compute`` raises, the exception goes to its caller only; callers that
        were waiting for it compute again themselves.
        """
        while True:
            with self._lock:
                emb = self._items.get(key)
                if emb is not None:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return emb
                flight = self._flights.get(key)
                mine = flight is None
                if flight is None:
                    flight = self._flights[key] = _Flight()
                    self.misses += 1
            if mine:
                return self._fly(key, flight, compute)
            flight.done.wait()
            if flight.result is not None:
                with self._lock:
                    self.hits += 1
                return flight.result
            # the computation failed: try again (this caller may compute it itself)

    def computing(self, key: SliceKey) -> bool:
        """Whether some thread is computing ``key`` right now."""
        with self._lock:
            return key in self._flights

    def _fly(self, key: SliceKey, flight: _Flight, compute: Callable[[], Embedding]) -> Embedding:
        try:
            emb = compute()
            with self._lock:
                self.put(key, emb)
                flight.result = emb
            return emb
        finally:
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()

    def drop(self, predicate: Callable[[SliceKey], bool]) -> int:
        """Remove every entry whose key satisfies ``predicate``; returns how many."""
        with self._lock:
            doomed = [k for k in self._items if predicate(k)]
            for k in doomed:
                self._bytes -= self._items.pop(k).nbytes
            return len(doomed)

    def clear(self) -> None:
        """Remove everything."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def _evict(self) -> None:
        while self._bytes > self._budget and len(self._items) > 1:
            _, emb = self._items.popitem(last=False)
            self._bytes -= emb.nbytes
