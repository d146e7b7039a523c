"""One image to work on: where its planes come from and how they are seen."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..engine.encoding import SliceRef
from ..engine.store.names import claim_image, source_of
from .io import plane_indices, planes_view, read_image
from .validate import check_window

_OPENED: dict[tuple, object] = {}
_OPENED_LOCK = threading.Lock()


def open_cached(path: Path | str, series: int | None = None):
    """:func:`~.io.read_image` once per process and file version (workers reuse the handle)."""
    resolved = Path(path).resolve()
    try:
        stat = resolved.stat()
    except OSError:
        return read_image(resolved, series)  # raises InputError with the reason
    key = (str(resolved), stat.st_mtime_ns, stat.st_size, series)
    with _OPENED_LOCK:
        if key not in _OPENED:
            _OPENED[key] = read_image(resolved, series)
        return _OPENED[key]


@dataclass(frozen=True)
class StackJob:
    """An image and how to cut it into planes.

    Attributes
    ----------
    data : array-like or Path or str
        ``(..., rows, cols[, channels])`` numpy / dask / zarr array, or a file to open lazily.
    image : str
        Its name in an embedding store.
    axis : int
        The slice axis (moved to the front; the other axes keep their order).
    rgb : bool
        The last axis holds colour channels.
    window : tuple[float, float] or None
        Contrast window mapped to 0..255 (None: uint8 as is, per-plane min-max otherwise).
    slices : slice or None
        Positions along the slice axis to use (None: all).
    series : int or None
        For a TIFF file: the image series to read (None: the full-resolution one).
    """

    data: object
    image: str = "image"
    axis: int = 0
    rgb: bool = False
    window: tuple[float, float] | None = None
    slices: slice | None = None
    series: int | None = None

    def __post_init__(self) -> None:
        check_window(self.window)

    @property
    def is_file(self) -> bool:
        """Whether :attr:`data` is a path (re-openable by a cluster worker)."""
        return isinstance(self.data, (str, Path))

    def view(self):
        """The data with the slice axis first (opened lazily when :attr:`data` is a path)."""
        data = open_cached(self.data, self.series) if self.is_file else self.data
        return planes_view(data, self.axis, self.rgb)

    def indices(self, view=None) -> list[tuple[int, ...]]:
        """Leading indices of the selected planes, in order."""
        return plane_indices(self.view() if view is None else view, self.rgb, self.slices)

    def ref(self, view, index: tuple[int, ...]) -> SliceRef:
        """The :class:`SliceRef` of one plane of ``view``."""
        window = None if self.window is None else (float(self.window[0]), float(self.window[1]))
        return SliceRef(view, tuple(index), self.rgb, window, source=self.image)

    def refs(self, view=None) -> list[SliceRef]:
        """One :class:`SliceRef` per selected plane."""
        view = self.view() if view is None else view
        return [self.ref(view, i) for i in self.indices(view)]


def claim_names(store, jobs: Sequence[StackJob]) -> list[StackJob]:
    """``jobs`` with each file's store name made its own (:mod:`~..engine.store.names`).

    A file named like another file already in ``store`` (an opened
    :class:`~..engine.store.embedding_store.EmbeddingStore`, or None) gets ``NAME.2``...
    instead of sharing that file's entries; arrays keep their names.
    """
    if store is None:
        return list(jobs)
    create = store.mode == "a"
    return [replace(job, image=claim_image(store.path, job.image, source_of(str(job.data)),
                                           create)) if job.is_file else job for job in jobs]
