"""Run a callback once prompts have settled: at once after a quiet spell, else after a pause.

The first change after a quiet spell runs on the next turn of the event loop (a click answers
without waiting); changes that follow quickly, or arrive while a job is out, wait until
``quiet_ms`` have passed without another change.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from qtpy.QtCore import QTimer


class Debouncer:
    """A single-shot Qt timer with the leading-edge rule above.

    Every method is safe after Qt deleted the timer (at interpreter exit): it then does nothing.

    Parameters
    ----------
    callback : callable
        Called (on the Qt thread) when the timer fires.
    quiet_ms : int
        The pause that follows a burst of changes.
    """

    def __init__(self, callback: Callable[[], None], quiet_ms: int) -> None:
        self.quiet_ms = quiet_ms
        self.last_run = 0.0  # time.monotonic() of the last run
        self._timer = QTimer()
        self._timer.setSingleShot(True)
        self._timer.setInterval(quiet_ms)
        self._timer.timeout.connect(callback)

    @property
    def active(self) -> bool:
        """Whether a run is scheduled."""
        try:
            return self._timer.isActive()
        except RuntimeError:  # "wrapped C/C++ object ... has been deleted"
            return False

    @property
    def interval(self) -> int:
        """Milliseconds the scheduled run waits (0: the next turn of the event loop)."""
        try:
            return self._timer.interval()
        except RuntimeError:
            return self.quiet_ms

    def poke(self, busy: bool) -> None:
        """Something changed; ``busy``: a job is still out (so wait for quiet)."""
        quiet = time.monotonic() - self.last_run >= self.quiet_ms / 1000
        try:
            if not self.active and not busy and quiet:
                self._timer.start(0)
            elif not (self.active and self.interval == 0):
                self._timer.start(self.quiet_ms)
        except RuntimeError:
            pass

    def ran(self) -> None:
        """The callback is running now: nothing stays scheduled."""
        self.stop()
        self.last_run = time.monotonic()

    def stop(self) -> None:
        """Drop the scheduled run, if any."""
        try:
            self._timer.stop()
        except RuntimeError:
            pass
