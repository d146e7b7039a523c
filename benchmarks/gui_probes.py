"""Qt probes for the GUI cases: an event-loop stall ticker, and encoders that say when they run."""

from __future__ import annotations

import time

from benchmarks.timing import Recorder


class Ticker:
    """A 10 ms QTimer that records the largest gap between its ticks (an event-loop stall)."""

    def __init__(self, interval_ms: int = 10) -> None:
        from qtpy.QtCore import QTimer

        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.gaps: list[float] = []
        self.spans: list[tuple[float, float]] = []  # (start, end) of every gap
        self._last = 0.0

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self._last)
        self.spans.append((self._last, now))
        self._last = now

    def max_gap_within_ms(self, start: float, end: float) -> float:
        """The longest gap lying inside ``[start, end]`` (perf_counter seconds), in ms."""
        inside = [b - a for a, b in self.spans if a >= start and b <= end]
        return 1e3 * max(inside, default=0.0)

    def start(self) -> None:
        """Start ticking with no gaps recorded."""
        self.gaps, self.spans, self._last = [], [], time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        """Record the last gap and stop."""
        self._tick()
        self.timer.stop()

    @property
    def max_gap_ms(self) -> float:
        """The longest wait between ticks, in ms."""
        return 1e3 * max(self.gaps, default=0.0)


def stretch(adapter, seconds: float) -> None:
    """Make ``adapter.encode`` last ``seconds``: after encoding, re-run its encoder session(s).

    onnxruntime releases the GIL while it runs, as during a real 16-21 s encode, so the event
    loop competes with the encoder's threads for the CPUs, not for the interpreter.
    """
    orig = adapter.encode

    def encode(rgb):
        with Recorder() as rec:
            emb = orig(rgb)
        replay, end = rec.replay(), time.perf_counter() + seconds
        while time.perf_counter() < end:
            replay()
        return emb

    adapter.encode = encode


def timed_encodes(adapter) -> list[tuple[float, float]]:
    """Wrap ``adapter.encode`` to note the ``(start, end)`` of every call; returns the list."""
    spans: list[tuple[float, float]] = []
    orig = adapter.encode

    def encode(rgb):
        t0 = time.perf_counter()
        try:
            return orig(rgb)
        finally:
            spans.append((t0, time.perf_counter()))

    adapter.encode = encode
    return spans


def idle_stall(ticker: Ticker, seconds: float) -> float:
    """The same ticker over an idle event loop of the same length (the baseline)."""
    from qtpy.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(int(1e3 * seconds), loop.quit)
    ticker.start()
    loop.exec()
    ticker.stop()
    return ticker.max_gap_ms
