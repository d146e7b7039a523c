"""Encode ahead: spend idle time encoding the planes the user is likely to visit next.

An :class:`EncodeAhead` owns one background thread. :meth:`EncodeAhead.follow` tells it where
the user is; it then encodes, one at a time, the current plane (if nobody has) and up to
``ahead`` planes in the direction the user last moved along the last leading axis (z+1, z+2
after a step up; z-1, z-2 after a step down), then the next images of a series if a
:attr:`EncodeAhead.series` hook offers them. An image of a series that is not open yet is
offered as a :class:`Pending`: a name and a function that reads it, called in the background
thread (the read never holds up the caller's Qt thread). It goes through the one
:class:`~napari_sam3_onnx.engine.encoding.SliceEncoder`, so its embeddings land in the shared
cache and, when a store is attached (a store-backed encoder), in the store.

It yields at once to the user. Every encode the encoder reports from another thread (the
user's click, a text search, a propagation) pre-empts the background one: its runs are stopped
through a :class:`~napari_sam3_onnx.models.preempt.CancelToken` (onnxruntime's
``RunOptions.terminate``, OpenVINO's ``InferRequest.cancel()``), the plane goes back to the
front of the queue, nothing of it is cached or stored, and the thread waits until the user's
encodes are over. A plane the user asks for *while the background is encoding that very plane*
is awaited rather than restarted: the cache is single-flight, so the user's request joins the
encode already under way, which is the soonest way to that plane's embedding (restarting it
would throw the work done away), and a plane is never served half-done either way.

Bounds: at most ``ahead`` planes beyond the current one, fewer when the cache's byte budget
(:attr:`~napari_sam3_onnx.engine.cache.EmbeddingCache.budget_bytes`) cannot hold the current
plane and the planes ahead, and nothing while the machine's available memory is below two more
embeddings. No Qt here: a GUI reads :attr:`EncodeAhead.state` on its own thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from napari_sam3_onnx.engine.ahead_plan import (
    DEFAULT_AHEAD,
    DEFAULT_EMBEDDING_BYTES,
    Pending,
    Planned,
    SeriesHook,
    available_bytes,
    memory_allows,
    plane_label,
    planes_ahead,
)
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.preempt import CancelToken, Preempted

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_AHEAD", "DEFAULT_EMBEDDING_BYTES", "AheadState", "EncodeAhead", "Pending",
           "Planned", "SeriesHook", "available_bytes", "memory_allows", "plane_label",
           "planes_ahead"]

@dataclass
class _Job:
    """The background work in flight: what it is for, its stop token, what names it."""

    item: Planned
    token: CancelToken
    idents: set  # its plan identities: the plane's cache key, a pending's name, or both


@dataclass(frozen=True)
class AheadState:
    """What the scheduler is doing, for a status line.

    Attributes
    ----------
    kind : {"off", "idle", "encoding", "paused", "memory", "failed"}
        Off; nothing to do; encoding ``ref``; yielding to the user's encode; waiting for
        memory; the last background encode failed (``text`` says why).
    text : str
        One line for people ("encoding z=13 ahead", "paused: your encode first").
    ref : SliceRef or None
        The plane concerned.
    """

    kind: str
    text: str
    ref: SliceRef | None = None


class EncodeAhead:
    """Encodes the planes ahead of the user in one background thread, yielding to the user.

    Parameters
    ----------
    encoder : SliceEncoder, optional
        The shared encoder (:meth:`attach` another when the model changes).
    ahead : int
        Planes beyond the current one.
    memory : callable
        Returns the available bytes (None: unknown); default :func:`available_bytes`.
    label : callable
        ``label(ref) -> str`` names a plane in :attr:`state` (default :func:`plane_label`).

    Attributes
    ----------
    series : callable or None
        :data:`SeriesHook`: the next images of a series, planned after the planes ahead.
    encoded : int
        Planes encoded in the background.
    preempted : int
        Background encodes stopped to make way for the user's (or a new plan).
    stopped_at : float or None
        ``time.perf_counter()`` when the last one had stopped (benchmarks).
    """

    def __init__(self, encoder: SliceEncoder | None = None, ahead: int = DEFAULT_AHEAD,
                 memory: Callable[[], int | None] = available_bytes,
                 label: Callable[[SliceRef], str] = plane_label,
                 need: Callable[[SliceEncoder], Capability | None] = lambda encoder: None,
                 ) -> None:
        self.ahead = int(ahead)
        #: The workflow the planes are encoded for (``encoder -> Capability``): a bundle with
        #: one encoder per workflow precision keys its embeddings by it, so the plan must
        #: encode (and look up) what the user's next click will ask for.
        self.need = need
        self.series: SeriesHook | None = None
        self.encoded = self.preempted = 0
        self.stopped_at: float | None = None
        self._memory, self._label = memory, label
        self._cond = threading.Condition()
        self._queue: list[Planned] = []
        self._job: _Job | None = None
        self._yielded: CancelToken | None = None  # the job stopped for the user's encode
        self._user = 0  # encodes of other threads in progress
        self._enabled, self._closed = True, False
        self._direction = 1
        self._last: SliceRef | None = None
        self._state = AheadState("idle", "")
        self._encoder: SliceEncoder | None = None
        self._unlisten: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self.attach(encoder)

    # ---- what the caller says ----------------------------------------------------------
    @property
    def state(self) -> AheadState:
        """What it is doing now."""
        with self._cond:
            return self._state

    @property
    def direction(self) -> int:
        """+1 after the user last moved up the last leading axis, -1 after moving down."""
        return self._direction

    @property
    def enabled(self) -> bool:
        """Whether it encodes at all (off: the work in flight is stopped, the queue emptied)."""
        return self._enabled

    @enabled.setter
    def enabled(self, on: bool) -> None:
        with self._cond:
            self._enabled = bool(on)
            if not on:
                self._drop_work()
            self._set("idle" if on else "off", "")

    def attach(self, encoder: SliceEncoder | None) -> None:
        """Work through ``encoder`` from now on (None: no model); the old plan is dropped."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        with self._cond:
            self._drop_work()
            self._encoder, self._last = encoder, None
        if encoder is not None:
            self._unlisten = encoder.listen(self._user_started, self._user_ended)

    def follow(self, ref: SliceRef, shape: Sequence[int]) -> list[Planned]:
        """The user is on ``ref``: learn the direction and plan what to encode; returns the plan.

        Parameters
        ----------
        ref : SliceRef
            The plane shown (with its window, and region for a field of view).
        shape : sequence of int
            The image's leading-axes shape (e.g. ``(depth,)`` for a z-stack).
        """
        last = self._last
        if (last is not None and last.source == ref.source and ref.index and last.index
                and len(last.index) == len(ref.index) and last.index[:-1] == ref.index[:-1]
                and last.index[-1] != ref.index[-1]):
            self._direction = 1 if ref.index[-1] > last.index[-1] else -1
        self._last = ref
        count = self._count()
        refs: list[Planned] = [ref, *planes_ahead(ref, shape, self._direction, count)]
        if self.series is not None and len(refs) <= count:
            refs += list(self.series(count + 1 - len(refs)))
        return self.plan(refs)

    def plan(self, refs: Sequence[Planned]) -> list[Planned]:
        """Encode ``refs`` (those not cached yet), in order, instead of the previous plan.

        The background work in flight goes on if its plane (or its :class:`Pending` name) is
        still planned, else it is stopped. Returns what was queued.
        """
        encoder = self._encoder
        if encoder is None or not self._enabled or self._closed:
            return []
        keys, todo = set(), []
        for r in refs:
            ident = self._ident(encoder, r)
            if ident not in keys and (isinstance(r, Pending) or not self._cached(encoder, r)):
                keys.add(ident)
                todo.append(r)
        with self._cond:
            job = self._job
            if job is not None and not job.idents & keys:
                job.token.cancel()
                self._yielded = None  # no longer planned: not re-queued
            running = set() if job is None else job.idents
            self._queue = [r for r in todo if self._ident(encoder, r) not in running]
            self._start_thread()
            self._cond.notify_all()
        return todo

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or running (tests, benchmarks); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and self._job is None, timeout)

    def close(self) -> None:
        """Stop the work in flight and the thread (safe twice)."""
        self.attach(None)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    # ---- the user's encodes --------------------------------------------------------------
    def _user_started(self, _ref: SliceRef) -> None:
        if threading.current_thread() is self._thread:
            return
        with self._cond:
            self._user += 1
            if self._job is not None:
                self._yielded = self._job.token  # yield at once: back to the queue's front
                self._job.token.cancel()
            if self._enabled:
                self._set("paused", "paused: your encode first")

    def _user_ended(self, _ref: SliceRef, _error: BaseException | None) -> None:
        if threading.current_thread() is self._thread:
            return
        with self._cond:
            self._user = max(0, self._user - 1)
            if self._user == 0 and self._state.kind == "paused":
                self._set("idle", "")
            self._cond.notify_all()

    # ---- the background thread ---------------------------------------------------------
    def _start_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="encode-ahead", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(self._ready)
                if self._closed:
                    return
                item = self._queue.pop(0)
                self._cond.notify_all()  # wait_idle may be waiting for an empty queue
                encoder = self._encoder
                if encoder is None or (isinstance(item, SliceRef)
                                       and self._cached(encoder, item)):
                    continue
                ref = item if isinstance(item, SliceRef) else None
                if not memory_allows(self._memory(), self._entry_bytes(encoder)):
                    self._queue.clear()
                    self._set("memory", "paused: too little free memory", ref)
                    continue
                token = CancelToken()
                self._job = _Job(item, token, {self._ident(encoder, item)})
                self._set("encoding", "reading the next image" if ref is None
                          else f"encoding {self._label(ref)} ahead", ref)
            self._run(encoder, item, token)

    def _ready(self) -> bool:
        return self._closed or (bool(self._queue) and self._user == 0 and self._enabled)

    def _resolve(self, encoder: SliceEncoder, item: Planned,
                 token: CancelToken) -> SliceRef | None:
        """The plane of ``item`` (a pending one read now); None: nothing (more) to do."""
        if isinstance(item, SliceRef):
            return item
        ref = item.resolve()  # the read: not stoppable, but short next to an encode
        with self._cond:
            token.check("the read ahead")  # the user's encode came first: re-queued
            if ref is None or self._job is None:
                return None
            self._job.idents.add(self._ident(encoder, ref))  # the open image's plan keeps it
            if self._cached(encoder, ref):
                return None
            self._set("encoding", f"encoding {self._label(ref)} ahead", ref)
        return ref

    def _run(self, encoder: SliceEncoder, item: Planned, token: CancelToken) -> None:
        outcome, text = "idle", ""
        ref = item if isinstance(item, SliceRef) else None
        try:
            ref = self._resolve(encoder, item, token)
            if ref is not None:
                encoder.embed(ref, self.need(encoder), cancel=token)
                self.encoded += 1
        except Preempted:
            self.stopped_at = time.perf_counter()
            self.preempted += 1
            if self._user:
                outcome, text = "paused", "paused: your encode first"
        except Exception as exc:  # a background failure must not kill the thread
            what = "the next image" if ref is None else self._label(ref)
            log.warning("encoding %s ahead failed", what, exc_info=exc)
            outcome, text = "failed", f"encoding {what} ahead failed: {exc}"
        with self._cond:
            self._job = None
            if self._yielded is token and self._encoder is encoder and self._enabled:
                self._queue.insert(0, item)  # re-queued, never served half-done
            self._yielded = None
            if not self._enabled:
                outcome, text = "off", ""
            self._set(outcome, text, ref if outcome == "failed" else None)
            self._cond.notify_all()

    # ---- helpers ---------------------------------------------------------------------
    def _cached(self, encoder: SliceEncoder, ref: SliceRef) -> bool:
        """Whether ``ref``'s embedding for :attr:`need` is cached."""
        return encoder.key(ref, self.need(encoder)) in encoder.cache

    def _ident(self, encoder: SliceEncoder, item: Planned) -> Hashable:
        """What names ``item`` in a plan: a plane's cache key, a pending one's name."""
        if isinstance(item, Pending):
            return ("pending", item.name)
        return encoder.key(item, self.need(encoder))

    def _count(self) -> int:
        """Planes ahead the cache's budget holds besides the current one (at most ``ahead``)."""
        encoder = self._encoder
        if encoder is None:
            return 0
        size = self._entry_bytes(encoder)
        return max(0, min(self.ahead, encoder.cache.budget_bytes // max(size, 1) - 1))

    @staticmethod
    def _entry_bytes(encoder: SliceEncoder) -> int:
        """The mean cached embedding's bytes (:data:`DEFAULT_EMBEDDING_BYTES` if none yet)."""
        cache = encoder.cache
        n = len(cache)
        return cache.nbytes // n if n else DEFAULT_EMBEDDING_BYTES

    def _drop_work(self) -> None:
        """Empty the queue and stop the encode in flight (holding the condition)."""
        self._queue.clear()
        self._yielded = None
        if self._job is not None:
            self._job.token.cancel()
        self._cond.notify_all()

    def _set(self, kind: str, text: str, ref: SliceRef | None = None) -> None:
        self._state = AheadState(kind, text, ref)
