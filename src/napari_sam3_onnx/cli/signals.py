"""SIGTERM and SIGHUP handled like Ctrl+C, and an account of what an interrupted run kept.

Cluster schedulers (SLURM, PBS, Kubernetes) end jobs with SIGTERM, and closing a terminal or an
ssh session sends SIGHUP. Python's default for both is to die at once, leaving partial output
files behind and printing nothing. Here both raise :class:`Terminated` (a KeyboardInterrupt), so
the same clean-up runs as after Ctrl+C: temporary outputs are deleted, finished store entries
stay, and the exit code is 128 + the signal number (130 Ctrl+C, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: Signals that end a run the way Ctrl+C does (SIGHUP does not exist on Windows).
SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
                if s is not None)


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM or SIGHUP arrives."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        """``"SIGTERM"`` or ``"SIGHUP"``."""
        return signal.Signals(self.signum).name


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal number: 130 for Ctrl+C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else int(signal.SIGINT))


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM/SIGHUP raise :class:`Terminated`.

    Only the first signal raises; repeats are ignored so that the clean-up it started can
    finish. Outside the main thread nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def handler(signum, frame):
        if fired:
            return
        fired.append(signum)
        raise Terminated(signum)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@dataclass
class RunRecord:
    """What a command has finished so far, for the message after an interruption.

    Attributes
    ----------
    store : Path or None
        The embedding store the run adds to.
    unit : str
        What the store's entries are (``"slice"`` or ``"tile"``).
    stored : int
        Entries complete in the store: for precompute every finished one (encoded now or
        found there), for text and propagate the ones this run added.
    stored_since_open : callable or None
        Entries this run has completed so far in a store it writes as it goes (added to
        ``stored``; text, propagate and segment-all read the store's own write count).
    written : list of str
        Output files already moved into place.
    pending : list of str
        Outputs not written yet (their temporary files are deleted).
    """

    store: Path | None = None
    unit: str = "slice"
    stored: int = 0
    stored_since_open: Callable[[], int] | None = None
    written: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)

    def outputs(self, *named: tuple[str, Path | None]) -> None:
        """Declare the run's outputs (``("--out", path)``; None entries are skipped)."""
        self.pending = [f"{flag} {p}" for flag, p in named if p is not None]

    def done(self, flag: str, path: Path) -> None:
        """An output is in place."""
        item = f"{flag} {path}"
        if item in self.pending:
            self.pending.remove(item)
        self.written.append(item)

    def kept(self) -> str:
        """One sentence: exactly what is on disk after the interruption."""
        parts = []
        stored = self.stored + (self.stored_since_open() if self.stored_since_open else 0)
        if self.store is not None and stored:
            plural = "" if stored == 1 else "s"
            parts.append(f"{stored} {self.unit} embedding{plural} in {self.store} "
                         "(run the same command again to resume)")
        parts += [f"{w} (complete)" for w in self.written]
        kept = "kept: " + "; ".join(parts) if parts else "nothing was kept"
        if self.pending:
            kept += "; not written: " + ", ".join(self.pending) + \
                    " (any file there before is unchanged)"
        return kept + "."


def interruption(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl+C or :class:`Terminated` behind ``exc``, if one caused it.

    A signal that arrives while a compiled module initialises (onnxruntime, scipy) surfaces
    as ``ImportError: initialization failed`` with the interrupt as its cause; it is still
    an interruption, not an error.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
