"""Where the Qt thread is while the event loop stalls: a sampling thread over a tick timestamp.

A 10 ms QTimer on the Qt thread stamps the time it last ran; a plain Python thread wakes every
few milliseconds and, when the stamp is older than ``threshold_ms``, records the Qt thread's stack
(and every other thread's, to see who held the interpreter) through ``sys._current_frames()``.
At the end :meth:`StallSampler.report` prints the stacks seen most often during stalls, so a
stall is traced to the lines that cause it (py-spy is not installed here).

The sampler itself needs the GIL to look: when the Qt thread waits for the interpreter, the
sample shows the Python line it waits at, and the other threads' stacks show who held it.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import Counter


def _stack(frame, depth: int) -> tuple[str, ...]:
    """The innermost ``depth`` frames of ``frame``'s stack as 'file:line func' (innermost last)."""
    out = []
    for fs in traceback.extract_stack(frame)[-depth:]:
        path = fs.filename
        for cut in ("site-packages/", "src/", "benchmarks/"):
            if cut in path:
                path = path.split(cut, 1)[1]
                break
        out.append(f"{path}:{fs.lineno} {fs.name}")
    return tuple(out)


class StallSampler:
    """Samples the Qt thread's stack whenever its event loop has not ticked for a while.

    Parameters
    ----------
    threshold_ms : float
        A stall: no tick for longer than this.
    every_ms : float
        How often the sampling thread looks.
    depth : int
        Frames kept per stack.
    """

    def __init__(self, threshold_ms: float = 50.0, every_ms: float = 5.0, depth: int = 12) -> None:
        from qtpy.QtCore import QTimer

        self.threshold = threshold_ms / 1e3
        self.every = every_ms / 1e3
        self.depth = depth
        self.main_id = threading.get_ident()
        self.samples: Counter[tuple[str, ...]] = Counter()
        self.others: Counter[tuple[str, ...]] = Counter()
        self.stalls = 0
        self.longest: tuple[float, list] = (0.0, [])  # (seconds, [(qt, others) per sample])
        self._current: list = []
        self._stamp = time.perf_counter()
        self._stop = threading.Event()
        self._timer = QTimer()
        self._timer.setInterval(10)
        self._timer.timeout.connect(self._tick)
        self._thread: threading.Thread | None = None

    def _tick(self) -> None:
        self._stamp = time.perf_counter()

    def start(self) -> None:
        """Start stamping (Qt thread) and sampling (a daemon thread)."""
        self._stamp = time.perf_counter()
        self._timer.start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stall-sampler")
        self._thread.start()

    def stop(self) -> None:
        """Stop both."""
        self._timer.stop()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        in_stall = False
        me = threading.get_ident()
        while not self._stop.wait(self.every):
            late = time.perf_counter() - self._stamp > self.threshold
            if not late:
                in_stall = False
                continue
            if not in_stall:
                self.stalls += 1
                in_stall, self._current = True, []
            frames = sys._current_frames()
            main = frames.get(self.main_id)
            qt = () if main is None else _stack(main, self.depth)
            self.samples[qt] += 1
            others = [_stack(frame, 4) for tid, frame in frames.items()
                      if tid not in (self.main_id, me)]
            for stack in others:
                self.others[stack] += 1
            self._current.append((qt, others))
            length = time.perf_counter() - self._stamp
            if length > self.longest[0]:
                self.longest = (length, self._current)

    def report(self, top: int = 6, out=sys.stdout) -> None:
        """Print the most frequent Qt-thread stacks during stalls (and the other threads')."""
        total = sum(self.samples.values())
        print(f"  stalls > {1e3 * self.threshold:.0f} ms: {self.stalls}, "
              f"samples {total} (every {1e3 * self.every:.0f} ms)", file=out)
        for stack, n in self.samples.most_common(top):
            print(f"  -- {n} samples, Qt thread:", file=out)
            for line in stack:
                print(f"       {line}", file=out)
        seconds, samples = self.longest
        if samples:
            print(f"  the longest stall ({1e3 * seconds:.0f} ms), Qt thread and others per "
                  "sample (innermost frame):", file=out)
            for qt, others in samples[:: max(1, len(samples) // 12)]:
                inner = [o[-1] for o in others if "status_checker" not in " ".join(o)]
                print(f"    {qt[-1] if qt else '?'}  ||  {'; '.join(inner)}", file=out)
        if self.others:
            print("  other threads during stalls:", file=out)
            for stack, n in self.others.most_common(top):
                print(f"    {n:4d}  {' <- '.join(reversed(stack))}", file=out)
