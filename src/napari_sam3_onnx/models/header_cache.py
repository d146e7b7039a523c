"""What was read from a graph file's header, kept while the file is provably unchanged.

Opening a bundle reads every graph's header, and again for each session and each later load of
the same folder (a new device, a dock reopened): for a full-size encoder that is ~8,000 node
headers walked in Python each time. A :class:`HeaderCache` keeps each answer under the file's
identity as ``fstat`` gives it on the descriptor actually read: device, inode, size, mtime and
ctime (in nanoseconds). A file replaced (a new inode), rewritten, truncated, touched or
renamed over changes one of them, so it is read again; a cache never serves a changed file:

* the identity is taken from the open descriptor before the read and compared after it; a file
  that changed during the read is answered but not kept;
* a file changed less than :data:`SETTLE_S` ago is answered but not kept: a write within the
  same timestamp tick as the last one would leave mtime and ctime as they are (git's "racy"
  rule), and ctime, which no program can set back, then moves on with the next change.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Generic, NamedTuple, TypeVar

T = TypeVar("T")

#: A file whose mtime or ctime is younger than this is read but not kept (seconds).
SETTLE_S = 2.0


class FileIdentity(NamedTuple):
    """What ``fstat`` says about a file: equal identities, unchanged bytes (see the module)."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        """The identity in a stat result."""
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def settled(self, settle_s: float) -> bool:
        """Whether the last change is at least ``settle_s`` old (a clock behind: not settled)."""
        age = time.time_ns() - max(self.mtime_ns, self.ctime_ns)
        return age >= settle_s * 1e9


class HeaderCache(Generic[T]):
    """Answers read from files, by :class:`FileIdentity`, at most ``entries`` of them (LRU).

    Parameters
    ----------
    entries : int
        How many files' answers are kept.
    settle_s : float
        Files changed more recently than this are not kept (:data:`SETTLE_S`).
    """

    def __init__(self, entries: int = 64, settle_s: float = SETTLE_S) -> None:
        self.entries, self.settle_s = entries, settle_s
        self._kept: OrderedDict[tuple[int, int], tuple[FileIdentity, T]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.reads = 0

    def get(self, path: Path, read: Callable[[Path, BinaryIO, int], T]) -> T:
        """``read(path, file, size)``'s answer for ``path``, kept from before if unchanged.

        Errors of ``read`` (and of opening the file) propagate and nothing is kept.
        """
        with path.open("rb") as f:
            before = FileIdentity.of(os.fstat(f.fileno()))
            where = (before.device, before.inode)
            with self._lock:
                kept = self._kept.get(where)
                if kept is not None and kept[0] == before:
                    self._kept.move_to_end(where)
                    self.hits += 1
                    return kept[1]
            value = read(path, f, before.size)
            after = FileIdentity.of(os.fstat(f.fileno()))
        with self._lock:
            self.reads += 1
            if after == before and after.settled(self.settle_s):
                self._kept[where] = (after, value)
                self._kept.move_to_end(where)
                while len(self._kept) > self.entries:
                    self._kept.popitem(last=False)
            else:
                self._kept.pop(where, None)
        return value

    def clear(self) -> None:
        """Forget every answer."""
        with self._lock:
            self._kept.clear()
