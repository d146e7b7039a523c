"""Which image series of a multi-series TIFF to read.

Microscope and pyramid OME-TIFFs often hold several series: a small preview or label image
first, the acquisition after it (tifffile reads series 0 unless told otherwise). A pyramid
inside one series keeps its full resolution as level 0, so the series to read is the one whose
planes are largest. When two or more series tie for that size (several stage positions or wells
in one file), no choice is right and the file is refused unless the user names one.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..models.errors import Sam3OnnxError


class SeriesError(Sam3OnnxError, ValueError):
    """A multi-series TIFF whose full-resolution series cannot be told apart."""


def _plane_px(shape: tuple[int, ...], axes: str) -> int:
    """Pixels of one plane: the ``Y`` and ``X`` axes (the last two when they are not named)."""
    axes = axes.upper()
    if "Y" in axes and "X" in axes and len(axes) == len(shape):
        return int(shape[axes.index("Y")]) * int(shape[axes.index("X")])
    return int(shape[-2]) * int(shape[-1]) if len(shape) >= 2 else int(shape[0])


def choose_series(tf, path: Path | str, announce: bool = True,
                  series: int | None = None) -> int:
    """The index of the full-resolution series of the open ``tifffile.TiffFile`` ``tf``.

    Parameters
    ----------
    tf : tifffile.TiffFile
        The open file.
    path : Path or str
        For messages.
    announce : bool
        With more than one series, warn which one is read (a ``UserWarning``; the command
        line shows it as one ``warning:`` line).
    series : int, optional
        The series the user named (``--series``): checked and returned, no warning.

    Raises
    ------
    SeriesError
        Several series tie for the largest plane size, or ``series`` is not one of the file's.
    """
    found = list(tf.series)
    listing = ", ".join(f"{i}: {'x'.join(map(str, s.shape))} {s.axes}"
                        for i, s in enumerate(found))
    if series is not None:
        if not 0 <= series < len(found):
            raise SeriesError(f"--series {series}: {path} holds {len(found)} image series "
                              f"({listing}).")
        return series
    if len(found) <= 1:
        return 0
    top = full_size_series(found)
    if len(top) > 1:
        raise SeriesError(f"{path} holds {len(found)} image series ({listing}) and series "
                          f"{', '.join(map(str, top))} are all full-size: name one with "
                          f"--series (e.g. --series {top[0]}), or save it as its own file.")
    index = top[0]
    if announce:
        warnings.warn(f"{path} holds {len(found)} image series ({listing}); reading series "
                      f"{index}, the full-resolution one (--series N reads another).",
                      UserWarning, stacklevel=2)
    return index


def full_size_series(series) -> list[int]:
    """Indices of the series in ``series`` (``tf.series``) whose planes are the largest.

    One index: the full-resolution series :func:`choose_series` reads; several: a tie it refuses.
    """
    sizes = [(_plane_px(tuple(s.shape), str(s.axes)), i) for i, s in enumerate(series)]
    best = max(size for size, _ in sizes)
    return [i for size, i in sizes if size == best]
