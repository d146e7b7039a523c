"""Interleaved ratio timing: a plugin path against the same ONNX calls replayed raw.

A :class:`Recorder` notes every :meth:`LazySession.run` a plugin path makes (the session, the
outputs asked for and the exact feed). Replaying those calls straight on the onnxruntime sessions
is the baseline: the model work the path cannot avoid. :func:`interleaved` alternates plugin and
raw repetitions (and their order) so that load from other processes hits both alike; the result
is the median of the per-repetition ratios and their spread.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from napari_sam3_onnx.models.runtime import LazySession


@dataclass
class Call:
    """One recorded session run."""

    session: LazySession
    outputs: list[str]
    feed: dict[str, np.ndarray]


class Recorder:
    """Context manager that records every ``LazySession.run`` (any thread) while it is open."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._orig: Callable | None = None

    def __enter__(self) -> Recorder:
        orig = self._orig = LazySession.run
        calls = self.calls

        def run(lazy: LazySession, outputs, feeds):
            wanted = lazy.signature.input_names
            calls.append(Call(lazy, list(outputs), {k: v for k, v in feeds.items() if k in wanted}))
            return orig(lazy, outputs, feeds)

        LazySession.run = run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc) -> None:
        LazySession.run = self._orig  # type: ignore[method-assign]

    def counts(self) -> dict[str, int]:
        """Runs per graph file name."""
        return dict(Counter(c.session.path.name for c in self.calls))

    def replay(self) -> Callable[[], None]:
        """A function that re-runs the recorded calls directly on the onnxruntime sessions."""
        plan = [(c.session.session, c.outputs, c.feed) for c in self.calls]

        def raw() -> None:
            for sess, outputs, feed in plan:
                sess.run(outputs, feed)

        return raw


@dataclass
class Timing:
    """Paired timings (seconds) of a plugin path and its baseline."""

    pairs: list[tuple[float, float]] = field(default_factory=list)

    @property
    def ratios(self) -> np.ndarray:
        """Per-repetition plugin / baseline."""
        p = np.array(self.pairs, float)
        return p[:, 0] / np.maximum(p[:, 1], 1e-12)

    def summary(self) -> dict[str, float]:
        """Medians in ms, overhead (median of per-pair differences), ratio median and spread."""
        p = np.array(self.pairs, float) * 1e3
        r = self.ratios
        q1, q3 = np.percentile(r, [25, 75])
        return {
            "plugin_ms": float(np.median(p[:, 0])),
            "raw_ms": float(np.median(p[:, 1])),
            "overhead_ms": float(np.median(p[:, 0] - p[:, 1])),
            "ratio": float(np.median(r)),
            "ratio_q1": float(q1),
            "ratio_q3": float(q3),
            "ratio_min": float(r.min()),
            "ratio_max": float(r.max()),
            "reps": len(r),
        }


def interleaved(
    plugin: Callable[[], object],
    raw: Callable[[], object],
    reps: int,
    before_plugin: Callable[[], object] | None = None,
    timer: Callable[[Callable[[], object]], float] | None = None,
) -> Timing:
    """Time ``plugin`` and ``raw`` alternately, swapping their order every repetition.

    Parameters
    ----------
    plugin, raw : callable
        The two paths; each is called ``reps`` times.
    reps : int
        Repetitions (pairs).
    before_plugin : callable, optional
        Untimed set-up before each plugin run (e.g. emptying the embedding cache).
    timer : callable, optional
        ``timer(plugin) -> seconds`` for paths whose end is an event (the GUI); default: wall
        time around the call.
    """
    def clock(fn: Callable[[], object]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    timing = Timing()
    for i in range(reps):
        gc.collect()
        t = [0.0, 0.0]
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            if which == 0:
                if before_plugin is not None:
                    before_plugin()
                t[0] = (timer or clock)(plugin)
            else:
                t[1] = clock(raw)
        timing.pairs.append((t[0], t[1]))
    return timing
