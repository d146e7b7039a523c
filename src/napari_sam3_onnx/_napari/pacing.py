"""A worker's results applied on the Qt thread at a bounded rate, so the UI never stalls.

A fast run (the toy model, a small image) yields a slice every few milliseconds. Writing each
into a layer, refreshing it and updating napari's activity bar (which turns the event loop
itself) on every slice keeps the Qt thread busy for the whole run: the window stops repainting
and a Cancel click waits behind the queued slices. :class:`Pacer` takes each result in O(1)
(a list append) and hands everything that arrived to ``apply`` at most once per
:data:`INTERVAL_MS`, then once more when the run ends (:meth:`Pacer.flush`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from qtpy.QtCore import QObject, QTimer

#: Least time between two applications of results (ms).
INTERVAL_MS = 100

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

    Parameters
    ----------
    apply : callable
        ``apply(items)`` with the list of results that arrived since the last batch, in order.
    interval_ms : int
        Least time between two batches.
    parent : QObject, optional
        Owner (the timer stops with it).
    clock : callable
        Monotonic seconds. A batch is applied only once ``interval_ms`` has passed on this clock
        since the first result it holds arrived (the timer is only when to look again), so a
        test that gives its own clock decides how many batches a run makes, whatever the
        machine's load.

    Attributes
    ----------
    clock : callable
        As given (a test may replace it before a run).
    batches : int
        Batches applied so far.
    """

    def __init__(self, apply: Callable[[list], None], interval_ms: int = INTERVAL_MS,
                 parent: QObject | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self._apply = apply
        self._items: list = []
        self.clock = clock
        self._interval_ms = int(interval_ms)
        self._since = 0.0  # clock() when the first result now waiting arrived
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self._interval_ms)
        self._timer.timeout.connect(self._look)
        self.batches = 0  # batches applied (for tests and benchmarks)

    @property
    def pending(self) -> int:
        """Results waiting for the next batch."""
        return len(self._items)

    def push(self, item) -> None:
        """Take one result; it is applied with the next batch."""
        self._items.append(item)
        if not self._timer.isActive():
            self._since = self.clock()
            self._timer.start(self._interval_ms)

    def _look(self) -> None:
        """The timer fired: apply the batch if its interval has passed on ``clock``."""
        left_ms = self._interval_ms - 1e3 * (self.clock() - self._since)
        if left_ms > 0:  # a coarse timer fired early, or a test's clock has not moved on
            self._timer.start(max(1, math.ceil(left_ms)))
            return
        self.flush()

    def flush(self) -> None:
        """Apply what is waiting now (the run ended, or the interval passed)."""
        self._timer.stop()
        items, self._items = self._items, []
        if items:
            self.batches += 1
            self._apply(items)

    def drop(self) -> None:
        """Forget what is waiting (the run's output is gone)."""
        self._timer.stop()
        self._items = []

