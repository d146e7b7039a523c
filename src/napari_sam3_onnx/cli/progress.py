"""Progress bars for the command line, drawn by tqdm on a terminal and silent elsewhere.

The API reports absolute counts (``progress(done, total)`` in slices, ``progress(name, done,
total)`` in bytes for downloads); :class:`Bar` turns them into tqdm's increments. A bar draws
only when its stream is a terminal and ``--quiet`` was not given, so logs of batch jobs and
pipes get the final summary line of each command and nothing else.
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed stream
        return False


class Bar:
    """One tqdm bar fed with absolute counts.

    Parameters
    ----------
    label : str
        What is counted (a file name, "encode").
    unit : str
        ``"slice"`` (default) or ``"B"`` (bytes, shown as kB/MB/GB).
    quiet : bool
        Draw nothing (``--quiet``).
    stream : file, optional
        Default ``sys.stderr``; nothing is drawn unless it is a terminal.
    """

    def __init__(self, label: str, unit: str = "slice", *, quiet: bool = False,
                 stream: TextIO | None = None) -> None:
        self.label = label
        self._done = 0
        stream = stream if stream is not None else sys.stderr
        self._bar = tqdm(desc=label, unit=unit, unit_scale=unit == "B", unit_divisor=1024,
                         file=stream, disable=quiet or not _is_terminal(stream),
                         dynamic_ncols=True, leave=True)

    @property
    def done(self) -> int:
        """The count shown (also kept while nothing is drawn)."""
        return self._done

    def update(self, done: int, total: int | None = None) -> None:
        """Set the count to ``done`` of ``total`` (None: total unchanged or unknown)."""
        if total is not None and total != self._bar.total:
            self._bar.total = int(total)
        self._bar.update(int(done) - self._done)
        self._done = int(done)

    def close(self) -> None:
        """Finish the bar's line."""
        self._bar.close()


class FileBars:
    """Download progress ``(name, done, total)`` as one byte bar per file, closed in turn."""

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream
        self.bar: Bar | None = None

    def __call__(self, name: str, done: int, total: int | None) -> None:
        """Show ``done`` of ``total`` bytes of ``name`` (a new name starts a new bar)."""
        if self.bar is None or self.bar.label != name:
            self.close()
            self.bar = Bar(name, unit="B", quiet=self.quiet, stream=self.stream)
        self.bar.update(done, total)

    def close(self) -> None:
        """Finish the current file's bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
