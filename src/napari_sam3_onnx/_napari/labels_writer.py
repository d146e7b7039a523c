"""The one undoable writer into a napari Labels layer: every tab's commit goes through here.

napari records a Labels edit in the layer's history when it is made with
``Labels.data_setitem``: the changed pixels' indices, their previous values and the new ones (an
"atom"). Inside ``Labels.block_history()`` the atoms are grouped into one history item, so one
``layer.undo()`` (Ctrl+Z on the layer) takes the whole write back and ``layer.redo()`` puts it
back. Three ways of writing use that path:

* :func:`write_planes` - planes of new values, written only onto background pixels (or over
  other objects with ``overwrite``); what other objects kept is counted in
  :attr:`Written.skipped`, so a tab can say so (the Clicks, Text and Automatic commits, label
  refinement);
* :func:`write_pixels` - given pixels and values (the primitive the others use);
* :class:`LiveWrite` - pixels written at once, while a run goes on (no history), then made one
  undo step at its end, leaving out pixels the user painted over meanwhile (propagation).

Each write may carry a commit-log entry (:mod:`~napari_sam3_onnx._napari.commit_log`): what made
it (workflow, plane, prompts, settings), appended to the layer's log with a sample of the pixels
written, so "Save labels" can record how the labels were made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from napari.layers import Labels

from napari_sam3_onnx._napari import commit_log
from napari_sam3_onnx.engine.labels_merge import writable


def plane_indices(index: tuple[int, ...], mask: np.ndarray) -> tuple[np.ndarray, ...]:
    """Fancy indices into an n-D array for the ``True`` pixels of a ``(rows, cols)`` mask."""
    rows, cols = np.nonzero(mask)
    lead = tuple(np.full(rows.shape, i, dtype=np.intp) for i in index)
    return (*lead, rows, cols)


@dataclass
class Written:
    """What a :func:`write_planes` call wrote.

    Attributes
    ----------
    pixels : int
        Pixels changed.
    counts : dict[tuple[int, ...], dict[int, int]]
        Per plane index, ``{value: pixels written with it}`` (values that got no pixel absent).
    skipped : dict[tuple[int, ...], set[int]]
        Per plane index, the ids of the other objects that kept pixels a value asked for
        (only without ``overwrite``); empty when nothing was refused.
    """

    pixels: int = 0
    counts: dict[tuple[int, ...], dict[int, int]] = field(default_factory=dict)
    skipped: dict[tuple[int, ...], set[int]] = field(default_factory=dict)

    def count(self, index: tuple[int, ...], value: int) -> int:
        """Pixels written with ``value`` on plane ``index`` (0: none)."""
        return self.counts.get(tuple(index), {}).get(int(value), 0)

    def note(self) -> str:
        """What other objects kept, for the user ("" when nothing was refused)."""
        if not self.skipped:
            return ""
        ids = sorted(set().union(*self.skipped.values()))
        shown = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
        return (f" Pixels of other objects (id {shown}) on {len(self.skipped)} slice(s) were "
                "kept as they were; the new objects were written around them.")


def write_pixels(layer: Labels, idx: tuple[np.ndarray, ...], values: np.ndarray | int,
                 entry: Mapping | None = None, before: np.ndarray | None = None) -> int:
    """Write ``values`` at the fancy indices ``idx`` of ``layer.data`` as one undo step.

    Parameters
    ----------
    layer : napari.layers.Labels
        The target (its ``data`` must accept fancy indexing: numpy, zarr, dask-backed numpy).
    idx : tuple of numpy.ndarray
        One ``(N,)`` int array per data axis.
    values : numpy.ndarray or int
        ``(N,)`` ints, or one value for every pixel.
    entry : mapping, optional
        The commit-log entry of this write (JSON values); appended when a pixel changed.
    before : numpy.ndarray, optional
        ``(N,)`` the values ``layer.data`` holds at ``idx`` now, when the caller knows them
        (saves reading them back).

    Returns
    -------
    int
        Pixels changed (those already holding their value are left out of the history).
    """
    full = np.broadcast_to(np.asarray(values, np.int64), idx[0].shape)
    before = np.asarray(layer.data[idx]) if before is None else np.asarray(before)
    changed = before != full
    if not changed.any():
        return 0
    if changed.all():  # a live run's pixels: no copies of its hundreds of thousands
        new = np.ascontiguousarray(full)
    else:
        idx = tuple(a[changed] for a in idx)
        before, new = before[changed], full[changed]
    if entry is not None:
        commit_log.prune(layer)  # before this write can take an undone commit's pixels
    with layer.block_history():
        for value in np.unique(new):
            sel = new == value
            layer.data_setitem(tuple(a[sel] for a in idx), int(value), refresh=False)
    if entry is not None:
        commit_log.append(layer, entry, np.ravel_multi_index(idx, layer.data.shape), new,
                          before)
    layer.refresh()
    return int(changed.sum())


def write_planes(layer: Labels,
                 planes: Iterable[tuple[tuple[int, ...], np.ndarray, np.ndarray | None]],
                 overwrite: bool = False, entry: Mapping | None = None) -> Written:
    """Write planes of new values into ``layer`` as one undo step.

    Parameters
    ----------
    layer : napari.layers.Labels
        The target, ``(..., rows, cols)``.
    planes : iterable of (index, values, where)
        ``index`` the plane's leading index; ``values`` ``(rows, cols)`` ints; ``where``
        ``(rows, cols)`` bool, the pixels to write (None: ``values > 0``).
    overwrite : bool
        Write over other objects' pixels too. Off: only pixels that are background (0) or
        already hold the value are written; the others are counted in ``skipped``.
    entry : mapping, optional
        The commit-log entry of the whole write.

    Returns
    -------
    Written
    """
    written = Written()
    parts: list[tuple[np.ndarray, ...]] = []
    vals: list[np.ndarray] = []
    for index, values, where in planes:
        index = tuple(int(i) for i in index)
        values = np.asarray(values)
        current = np.asarray(layer.data[index])
        mask, held = writable(current, values, where, overwrite)
        if held.any():
            written.skipped[index] = {int(i) for i in np.unique(current[held])}
        if not mask.any():
            continue
        ids, counts = np.unique(values[mask], return_counts=True)
        written.counts[index] = {int(i): int(n) for i, n in zip(ids, counts, strict=True)}
        parts.append(plane_indices(index, mask))
        vals.append(values[mask].astype(np.int64))
    if parts:
        idx = tuple(np.concatenate(axis) for axis in zip(*parts, strict=True))
        written.pixels = write_pixels(layer, idx, np.concatenate(vals), entry)
    return written


def _flat_view(data) -> np.ndarray | None:
    """A 1-D view of ``data`` when it is a C-contiguous numpy array (else None).

    Gathering and scattering through flat indices on it is several times faster than n-D fancy
    indexing, which matters on the Qt thread for a run's hundreds of thousands of pixels.
    """
    if isinstance(data, np.ndarray) and data.flags.c_contiguous:
        return data.reshape(-1)
    return None


def _first_and_last(flat: list[np.ndarray], before: list[np.ndarray],
                    after: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pixel written: its flat index, its value before its first write, after its last.

    Each write lists a pixel once; only writes whose index ranges overlap can share pixels,
    so only those are sorted (a propagation writes each slice once or twice: the rest is
    concatenated as it is). Keys come out grouped, not sorted.
    """
    spans = sorted(range(len(flat)), key=lambda i: int(flat[i].min()))
    groups: list[list[int]] = []
    top = -1
    for i in spans:
        lo, hi = int(flat[i].min()), int(flat[i].max())
        if groups and lo <= top:
            groups[-1].append(i)
        else:
            groups.append([i])
        top = max(top, hi)
    keys, orig, final = [], [], []
    for group in groups:
        group.sort()  # the order of the writes
        if len(group) == 1:
            i = group[0]
            keys.append(flat[i])
            orig.append(before[i])
            final.append(after[i])
            continue
        f = np.concatenate([flat[i] for i in group])
        b = np.concatenate([before[i] for i in group])
        a = np.concatenate([after[i] for i in group])
        k, first = np.unique(f, return_index=True)
        _, last_rev = np.unique(f[::-1], return_index=True)
        keys.append(k)
        orig.append(b[first])
        final.append(a[len(f) - 1 - last_rev])
    return np.concatenate(keys), np.concatenate(orig), np.concatenate(final)


class LiveWrite:
    """Pixels written into ``layer.data`` at once (no history), made one undo step at the end.

    A run that shows its result while it goes on (propagation) cannot hold a ``block_history``
    open across Qt events. It writes through :meth:`write`, which remembers each pixel's value
    before and after; :meth:`finish` puts back the original values of the pixels that still
    hold what the run wrote and writes them again through :func:`write_pixels`. Pixels the user
    painted over meanwhile keep the user's paint and are left out of the undo step.
    """

    def __init__(self, layer: Labels) -> None:
        self.layer = layer
        self._flat: list[np.ndarray] = []
        self._before: list[np.ndarray] = []
        self._after: list[np.ndarray] = []

    @property
    def pixels(self) -> int:
        """Pixels written so far (a pixel written twice counts twice)."""
        return int(sum(len(f) for f in self._flat))

    def write(self, idx: tuple[np.ndarray, ...], before: np.ndarray, after: np.ndarray) -> None:
        """Write ``after`` at ``idx`` (whose values are ``before``), outside the history.

        ``idx`` lists each pixel once.
        """
        data = self.layer.data
        flat = np.ravel_multi_index(idx, data.shape)
        view = _flat_view(data)
        if view is not None:
            view[flat] = after
        else:
            data[idx] = after
        self._flat.append(flat)
        self._before.append(np.asarray(before))
        self._after.append(np.asarray(after))

    def finish(self, entry: Mapping | None = None) -> int:
        """Make everything written one undo step; returns the pixels in it."""
        if not self._flat:
            return 0
        # A pixel written twice: its value before the run is its first "before", its value
        # now its last "after".
        keys, orig, final = _first_and_last(self._flat, self._before, self._after)
        self._flat, self._before, self._after = [], [], []
        data = self.layer.data
        view = _flat_view(data)
        idx = np.unravel_index(keys, data.shape)
        now = view[keys] if view is not None else np.asarray(data[idx])
        ours = now == final  # the user did not paint over it meanwhile
        if not ours.all():
            keys, orig, final = keys[ours], orig[ours], final[ours]
            idx = tuple(a[ours] for a in idx)
        if not len(final):
            return 0
        if view is not None:
            view[keys] = orig
        else:
            data[idx] = orig
        return write_pixels(self.layer, idx, final, entry, before=orig)
