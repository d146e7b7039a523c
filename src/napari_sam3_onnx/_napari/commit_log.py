"""The committed-object log of a Labels layer: what made each commit, kept with the layer.

Every write of :mod:`~napari_sam3_onnx._napari.labels_writer` that carries an entry (a JSON
dict: workflow, plane(s), prompts, settings, bundle) appends it to ``layer.metadata[KEY]``, so
the log goes wherever the layer goes (another dock, a copy of the layer, napari's own save of
its metadata) and "Save labels" can record it (:func:`records`).

Undo and redo. napari's ``layer.undo()`` puts the pixels of the last history item back and
``layer.redo()`` writes them again; neither tells anyone. So each entry keeps a sample of the
pixels its write changed (flat index, value before, value after): an entry is *live* while most
of its sampled pixels hold the value it wrote. An undone commit's pixels hold their old values
again, so its entry drops out of :func:`live_entries`; a redone one's hold the written values,
so it comes back. Before each new write the dead entries are pruned (:func:`prune`): napari
clears its redo history on a new edit, so an undone commit can never come back after one, and
its pixels may then be taken by the new commit's ids.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from napari.layers import Labels

#: ``layer.metadata`` key of the log.
KEY = "napari_sam3_onnx_commits"
#: ``layer.metadata`` key of the labelled pixels the layer held before its first logged commit.
HELD = "napari_sam3_onnx_held_before"
#: Pixels sampled per entry.
SAMPLE = 64


def _log(layer: Labels) -> list[dict]:
    log = layer.metadata.get(KEY)
    return log if isinstance(log, list) else []


def _is_live(data, item: Mapping) -> bool:
    sample = item.get("sample") or {}
    flat = np.asarray(sample.get("flat", []), np.int64)
    if not flat.size:
        return True
    if int(flat.max()) >= data.size:
        return False  # the layer's data was replaced by a smaller array
    now = np.asarray(data[np.unravel_index(flat, data.shape)])
    return int(np.count_nonzero(now == np.asarray(sample["after"]))) * 2 > flat.size


def live_entries(layer: Labels) -> list[dict]:
    """The entries of the commits that are in the layer now (undone ones left out), in order."""
    data = layer.data[0] if layer.multiscale else layer.data
    return [dict(item["entry"]) for item in _log(layer) if _is_live(data, item)]


def prune(layer: Labels) -> None:
    """Drop the entries of undone commits (called before each new write)."""
    log = _log(layer)
    if log:
        data = layer.data[0] if layer.multiscale else layer.data
        layer.metadata[KEY] = [item for item in log if _is_live(data, item)]
        if not layer.metadata[KEY]:  # every commit undone: the next one counts anew
            layer.metadata.pop(HELD, None)


def held_before(layer: Labels) -> int | None:
    """Labelled pixels the layer held under its commits (painted, opened); None: not known.

    Counted when the first logged commit was written (numpy data only: a lazy layer is not
    read whole for it). Pixels painted between commits are not counted.
    """
    held = layer.metadata.get(HELD)
    return None if held is None or not _log(layer) else int(held)


def append(layer: Labels, entry: Mapping, flat: np.ndarray, after: np.ndarray,
           before: np.ndarray) -> None:
    """Log ``entry`` for a write that changed the pixels ``flat`` from ``before`` to ``after``.

    Parameters
    ----------
    flat : numpy.ndarray
        ``(N,)`` flat (C-order) indices into ``layer.data`` of the changed pixels.
    after, before : numpy.ndarray
        ``(N,)`` their values after and before the write.
    """
    if not _log(layer):  # the first commit: what the layer held before it
        data = layer.data[0] if layer.multiscale else layer.data
        if isinstance(data, np.ndarray):
            layer.metadata[HELD] = int(np.count_nonzero(data) - np.count_nonzero(after)
                                       + np.count_nonzero(before))
        else:
            layer.metadata.pop(HELD, None)
    pick = np.unique(np.linspace(0, len(flat) - 1, min(SAMPLE, len(flat))).astype(np.int64))
    sample = {"flat": [int(v) for v in np.asarray(flat)[pick]],
              "after": [int(v) for v in np.asarray(after)[pick]],
              "before": [int(v) for v in np.asarray(before)[pick]]}
    layer.metadata[KEY] = [*_log(layer), {"entry": dict(entry), "sample": sample}]


def clear(layer: Labels) -> None:
    """Forget the log (the layer's data was replaced: its commits are gone)."""
    layer.metadata.pop(KEY, None)
    layer.metadata.pop(HELD, None)
