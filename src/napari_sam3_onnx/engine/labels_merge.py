"""How new objects go into a labels plane: the rules every commit follows, without napari.

The dock's writer (``_napari/labels_writer.py``) applies these rules to a napari Labels layer as
one undo step; a replay of a saved dock session (``api/dock_replay.py``) applies the very same
rules to a numpy array, so both place the same ids on the same pixels.

All planes are ``(rows, cols)``; ``values`` are integer ids, 0 = nothing to write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def writable(current: np.ndarray, values: np.ndarray, where: np.ndarray | None = None,
             overwrite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Which pixels a write changes, and which it is refused (other objects hold them).

    Parameters
    ----------
    current : numpy.ndarray
        ``(rows, cols)`` int, the plane as it is.
    values : numpy.ndarray
        ``(rows, cols)`` int, the new values.
    where : numpy.ndarray, optional
        ``(rows, cols)`` bool, the pixels to write (None: ``values > 0``).
    overwrite : bool
        Write over other objects' pixels too. Off: only background pixels (or pixels that
        already hold the value) are written.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``(rows, cols)`` bool: the pixels that change, the pixels refused.
    """
    current, values = np.asarray(current), np.asarray(values)
    mask = values > 0 if where is None else np.asarray(where, bool)
    refused = np.zeros(mask.shape, bool)
    if not overwrite:
        refused = mask & (current != 0) & (current != values)
        mask = mask & ~refused
    return mask & (current != values), refused


def new_objects(current: np.ndarray, masks: Sequence[np.ndarray], next_id: int,
                overwrite: bool = False) -> tuple[np.ndarray, list[int]]:
    """Masks as new objects with ids ``next_id, next_id + 1, ...`` (the Clicks commit).

    Earlier masks win where they overlap; without ``overwrite`` only background pixels are
    taken. A mask with no pixel left gets no id.

    Returns
    -------
    (numpy.ndarray, list of int)
        ``(rows, cols)`` int64 values (0: not written) and the ids given.
    """
    current = np.asarray(current)
    values = np.zeros(current.shape, np.int64)
    ids: list[int] = []
    for mask in masks:
        free = np.asarray(mask, bool) & (values == 0)
        if not overwrite:
            free &= current == 0
        if free.any():
            values[free] = next_id
            ids.append(next_id)
            next_id += 1
    return values, ids


def apply(current: np.ndarray, values: np.ndarray, where: np.ndarray | None = None,
          overwrite: bool = False) -> np.ndarray:
    """``current`` after a write of ``values`` by the :func:`writable` rule (a new array)."""
    change, _ = writable(current, values, where, overwrite)
    out = np.array(current, copy=True)
    out[change] = np.asarray(values)[change]
    return out


def propagated(current: np.ndarray, owner: np.ndarray, carried: Iterable[int],
               replace: Iterable[int] = (), overwrite: bool = False) -> np.ndarray:
    """A plane after one propagated slice is written into it (the Propagate tab's rule).

    Parameters
    ----------
    current : numpy.ndarray
        ``(rows, cols)`` int, the plane as it is.
    owner : numpy.ndarray
        ``(rows, cols)`` int, the object id each pixel goes to on this slice (0: none), as
        :class:`~napari_sam3_onnx.engine.tracking.labels.LabelWriter` resolves overlaps.
    carried : iterable of int
        The objects the slice has an output for (present or not).
    replace : iterable of int
        Objects whose earlier pixels give way on each slice they have an output on (a
        re-propagation replaces, never layers on top).
    overwrite : bool
        Write over other objects' pixels too. Off: only background and the object's own.

    Returns
    -------
    numpy.ndarray
        The new plane (a new array of ``current``'s dtype).
    """
    current, owner = np.asarray(current), np.asarray(owner)
    new = np.array(current, copy=True)
    for oid in set(int(i) for i in carried) & set(int(i) for i in replace):
        new[current == oid] = 0
    ok = owner > 0
    if not overwrite:
        ok &= (new == 0) | (new == owner)
    new[ok] = owner[ok]
    return new
