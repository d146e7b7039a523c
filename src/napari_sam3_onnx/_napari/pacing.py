"""A worker's results applied on the Qt thread at a bounded rate, so the UI never stalls.

A fast run (the toy model, a small image) yields a slice every few milliseconds. Writing each
into a layer, refreshing it and updating napari's activity bar (which turns the event loop
itself) on every slice keeps the Qt thread busy for the whole run: the window stops repainting
and a Cancel click waits behind the queued slices. :class:`Pacer` takes each result in O(1)
(a list append) and hands everything that arrived to ``apply`` at most once per
:data:`INTERVAL_MS`, then once more when the run ends (:meth:`Pacer.flush`).

A batch is applied in chunks that fit :data:`BUDGET_MS` of the Qt thread, the rest on the next
turns of the event loop (a repaint and a click can come between): the run's end delivers every
slice still waiting at once (a fast propagation: all 40 of a stack, 74 ms in one piece), and a
slow slice makes a batch of one. The chunk's size follows the last chunk's cost per result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from qtpy.QtCore import QObject, QTimer

#: Least time between two applications of results (ms).
INTERVAL_MS = 100

#: Most Qt-thread time one chunk of a batch should take (ms): the event loop turns between
#: chunks. A chunk holds at least one result, so one slow result still goes whole.
BUDGET_MS = 40

#: Least time between two updates of a run's features table (s): setting ``layer.features``
#: costs napari 5-15 ms (its validation, and a repaint of the layer's row in the layer list),
#: too much for every batch of a fast run; the table is complete when the run ends.
TABLE_EVERY_S = 1.0

#: Least time between two updates of a run's progress bar and status line (s). Each update
#: repaints the window at the next paint, and a napari window (its OpenGL canvas) is composed
#: whole: under software OpenGL on a loaded machine one such paint held the Qt thread for
#: 100-400 ms, ten times a second. The run's end always says where it stopped.
NEWS_EVERY_S = 0.5


class Every:
    """Says whether ``seconds`` have passed since it last said yes (the first ask: yes).

    Parameters
    ----------
    seconds : float
        Least time between two yeses.
    clock : callable
        Monotonic seconds (tests give their own).
    """

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self._clock = float(seconds), clock
        self._last: float | None = None

    def due(self) -> bool:
        """True (and restart the wait) when the time has passed."""
        now = self._clock()
        if self._last is not None and now - self._last < self.seconds:
            return False
        self._last = now
        return True


class Pacer(QObject):
    """Collects results and applies them in batches, at most one batch per ``interval_ms``.

    Each batch is handed to ``apply`` in chunks of about ``budget_ms`` of work (sized by the
    previous chunk's cost per result; the first chunk of all holds one result), one chunk per
    turn of the event loop.

    Parameters
    ----------
    apply : callable
        ``apply(items)`` with results in the order they arrived; every result once.
    interval_ms : int
        Least time between two batches.
    budget_ms : float
        Qt-thread time one chunk should take.
    parent : QObject, optional
        Owner (the timers stop with it).
    clock : callable
        Monotonic seconds, for the interval and the chunks' cost. A batch is applied only once
        ``interval_ms`` has passed on this clock since the first result it holds arrived (the
        timer only says when to look again), so a test that gives its own clock decides how
        many batches a run makes, whatever the machine's load.

    Attributes
    ----------
    clock : callable
        As given (a test may replace it before a run).
    batches, chunks : int
        Batches applied so far, and calls of ``apply``.
    """

    def __init__(self, apply: Callable[[list], None], interval_ms: int = INTERVAL_MS,
                 parent: QObject | None = None, budget_ms: float = BUDGET_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self._apply = apply
        self._items: list = []
        self._carry: list = []  # the rest of a batch: applied on the next turns
        self._then: Callable[[], None] | None = None  # after a flush's last chunk
        self._budget, self.clock = budget_ms / 1e3, clock
        self._interval_ms = int(interval_ms)
        self._since = 0.0  # clock() when the first result now waiting arrived
        self._cost: float | None = None  # seconds per result (the last chunk's)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self._interval_ms)
        self._timer.timeout.connect(self._look)
        self._next = QTimer(self)  # the next chunk, once the event loop has turned
        self._next.setSingleShot(True)
        self._next.setInterval(0)
        self._next.timeout.connect(self._continue)
        self.batches = 0  # batches applied (for tests and benchmarks)
        self.chunks = 0  # calls of ``apply``

    @property
    def pending(self) -> int:
        """Results not applied yet."""
        return len(self._items) + len(self._carry)

    def push(self, item) -> None:
        """Take one result; it is applied with the next batch."""
        self._items.append(item)
        if len(self._items) == 1:
            self._since = self.clock()
        if not (self._timer.isActive() or self._carry):
            self._timer.start(self._interval_ms)

    def _look(self) -> None:
        """The timer fired: apply the batch if its interval has passed on ``clock``."""
        left_ms = self._interval_ms - 1e3 * (self.clock() - self._since)
        if left_ms > 0:  # a coarse timer fired early, or a test's clock has not moved on
            self._timer.start(max(1, math.ceil(left_ms)))
            return
        self.flush()

    def flush(self, then: Callable[[], None] | None = None) -> None:
        """Apply what is waiting (the run ended, or the interval passed).

        The first chunk now, the rest on the next turns of the event loop; ``then()`` runs
        once everything is applied (at once when nothing waits).
        """
        self._timer.stop()
        self._next.stop()
        if then is not None:
            self._then = then
        items, self._items, self._carry = self._carry + self._items, [], []
        if items:
            self.batches += 1
        self._apply_some(items)

    def drop(self) -> None:
        """Forget what is waiting (the run's output is gone); a flush's ``then`` still runs."""
        self._timer.stop()
        self._next.stop()
        self._items, self._carry = [], []
        self._done()

    def _chunk(self, n: int) -> int:
        if self._cost is None:
            return min(n, 1)
        return max(1, min(n, int(self._budget / max(self._cost, 1e-6) + 1e-6)))

    def _apply_some(self, items: list) -> None:
        n = self._chunk(len(items))
        head, self._carry = items[:n], items[n:]  # ``pending``, during apply: what is left
        try:
            if head:
                t = self.clock()
                self.chunks += 1
                self._apply(head)
                self._cost = (self.clock() - t) / len(head)
        finally:
            if self._carry:
                self._next.start()
            elif self._then is not None:
                self._done()
            elif self._items and not self._timer.isActive():
                self._timer.start(self._interval_ms)  # pushed while the batch went in chunks

    def _continue(self) -> None:
        items, self._carry = self._carry, []
        self._apply_some(items)

    def _done(self) -> None:
        then, self._then = self._then, None
        if then is not None:
            then()
