"""The next image of a series, read ahead: one read shared by encode ahead and the viewer.

Encode ahead encodes the next image of a series before the user opens it, so its embedding
needs a cache key before any viewer layer (whose id keys an open image's embeddings) exists.
:meth:`ReadAhead.read` reads item ``k`` once, in the caller's (background) thread, and names
that read with a :class:`SeriesSource`; :meth:`ReadAhead.take` hands the same array and name to
whoever shows the image. The shown image keeps that name as its source, so its planes' keys
are the keys encode ahead used, by construction: same array, same window, same name. A second
read of the item (the first was dropped, or the file was read again) gets a new name, so
embeddings of one read are never served for another. No Qt or napari here: the caller gives
the rule for the contrast limits its viewer would choose.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .series import ImageSeries

#: ``limits(data, rgb) -> (low, high)``: the contrast limits an image is shown with.
LimitsRule = Callable[[np.ndarray, bool], tuple[float, float]]


@dataclass(frozen=True)
class SeriesSource:
    """The cache identity of one read of a series image (``SliceRef.source``).

    Attributes
    ----------
    item : str
        The series item's key (:attr:`SeriesItem.key`).
    name : str
        The item's name (for status lines and the store's image name).
    read : str
        Unique per read of the file.
    """

    item: str
    name: str
    read: str


@dataclass(frozen=True)
class ImageRead:
    """One image of a series, read.

    Attributes
    ----------
    index : int
        Its position in the series.
    data : numpy.ndarray
        ``(rows, cols)`` or RGB ``(rows, cols, 3|4)``, as :meth:`ImageSeries.read` gives it.
    rgb : bool
        The last axis holds colours.
    limits : tuple of float
        The contrast limits it is shown with (computed with the read, off the Qt thread).
    source : SeriesSource
        Its name in cache keys.
    """

    index: int
    data: np.ndarray
    rgb: bool
    limits: tuple[float, float]
    source: SeriesSource


class ReadAhead:
    """Holds at most one image read ahead of the viewer (thread-safe).

    Parameters
    ----------
    limits : callable
        :data:`LimitsRule` of the viewer that will show the image.
    forget : callable, optional
        ``forget(source)`` when a read is dropped unshown (its cached embeddings can go).
    """

    def __init__(self, limits: LimitsRule,
                 forget: Callable[[SeriesSource], None] = lambda source: None) -> None:
        self._limits, self._forget = limits, forget
        self._lock = threading.Lock()
        self._held: tuple[int, int, ImageRead] | None = None  # (id(series), index, read)
        self._reading: tuple[int, int, threading.Event] | None = None

    def read(self, series: ImageSeries, index: int) -> ImageRead:
        """Item ``index`` of ``series``, read now unless it is held (any thread).

        A read of another item replaces the one held (which is forgotten).
        """
        mark = (id(series), index)
        while True:
            with self._lock:
                held = self._held
                if held is not None and held[:2] == mark:
                    return held[2]
                busy = self._reading
                if busy is None:
                    done = threading.Event()
                    self._reading = (*mark, done)
                    break
            busy[2].wait()  # one read at a time; then look again
        try:
            data = series.read(index)
            rgb = data.ndim == 3
            item = series.items[index]
            got = ImageRead(index, data, rgb, self._limits(data, rgb),
                            SeriesSource(item.key, item.name, uuid.uuid4().hex))
            with self._lock:
                dropped, self._held = self._held, (*mark, got)
            if dropped is not None:
                self._forget(dropped[2].source)
            return got
        finally:
            with self._lock:
                self._reading = None
            done.set()

    def take(self, series: ImageSeries, index: int) -> ImageRead | None:
        """The held read of item ``index`` (waiting for one under way), handed over; else None.

        What is not taken is forgotten: the viewer moved elsewhere.
        """
        mark = (id(series), index)
        with self._lock:
            busy = self._reading
        if busy is not None and busy[:2] == mark:
            busy[2].wait()  # the read the viewer would do anyway
        with self._lock:
            held, self._held = self._held, None
        if held is not None and held[:2] == mark:
            return held[2]
        if held is not None:
            self._forget(held[2].source)
        return None

    def peek(self) -> ImageRead | None:
        """The read held now, if any (status lines, tests)."""
        with self._lock:
            return None if self._held is None else self._held[2]

    def drop(self) -> None:
        """Forget the read held (the series was closed)."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            self._forget(held[2].source)
