"""Writing masks into Labels layers: the scratch preview and the user's undoable target.

Commits go through the one undoable writer (:mod:`~napari_sam3_onnx._napari.labels_writer`),
so one ``layer.undo()`` (Ctrl+Z on the layer) removes the whole commit, however many objects it
held, and the commit's prompts are logged with the layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from napari.layers import Labels

from napari_sam3_onnx._napari.commit_entries import click_entry as _click_entry
from napari_sam3_onnx._napari.labels_writer import write_planes
from napari_sam3_onnx.engine.labels_merge import new_objects
from napari_sam3_onnx.models.errors import Sam3OnnxError


class CommitError(Sam3OnnxError):
    """Nothing could be written (no preview, wrong target shape, everything already labelled)."""


def show_preview(
    preview: Labels,
    index: tuple[int, ...],
    masks: Sequence[np.ndarray],
    previous: tuple[int, ...] | None,
) -> None:
    """Show ``masks`` (values 1..K) on plane ``index``; blank the plane shown before.

    The preview is scratch: writes bypass the undo history. Only the two planes involved are
    touched, so a large stack's preview costs memory for the planes shown, not the stack.
    """
    data = preview.data
    if previous is not None and previous != tuple(index):
        data[previous] = 0
    plane = np.zeros(data.shape[len(index):], dtype=data.dtype)
    for k, mask in enumerate(masks, start=1):
        plane[mask & (plane == 0)] = k
    data[tuple(index)] = plane
    preview.refresh()


def clear_preview(preview: Labels, index: tuple[int, ...] | None) -> None:
    """Blank the preview's plane ``index`` (None: nothing shown)."""
    if index is None:
        return
    preview.data[tuple(index)] = 0
    preview.refresh()


def undo_last(target: Labels | None, viewer, redo: bool = False) -> tuple[str, bool]:
    """Undo (or redo) the last change in ``target``, the layer of the last commit.

    Returns the message for the user and whether it is a warning (nothing to undo here).
    """
    if target is None or target not in viewer.layers:
        return ("There is no commit to undo here; select the Labels layer and press Ctrl+Z to "
                "undo its other changes.", True)
    target.redo() if redo else target.undo()  # napari ignores an empty history
    return f"{'Redid' if redo else 'Undid'} the last change in '{target.name}'.", False


def click_entry(session) -> dict:
    """The commit-log entry of a Clicks commit of ``session``'s preview (its plane, prompts)."""
    return _click_entry(session, session._shown, session.overwrite)


def commit_masks(
    target: Labels,
    index: tuple[int, ...],
    masks: Sequence[np.ndarray],
    overwrite: bool = False,
    entry: Mapping | None = None,
) -> list[int]:
    """Write each mask as a new object (ids ``max + 1, max + 2, ...``) as one undoable step.

    Parameters
    ----------
    target : napari.layers.Labels
        The user's labels; its shape must be the image's (without a colour axis).
    index : tuple[int, ...]
        The plane's index along the leading axes.
    masks : sequence of numpy.ndarray
        ``(rows, cols)`` bool masks, in object order; earlier objects win where they overlap.
    overwrite : bool
        Replace other objects' pixels. Off: only background (0) pixels are written.
    entry : mapping, optional
        The commit-log entry (:mod:`~napari_sam3_onnx._napari.commit_log`); ``"ids"`` is set
        to the ids written.

    Returns
    -------
    list of int
        The ids written (objects with no writable pixel get none).

    Raises
    ------
    CommitError
        The target does not fit the plane, or no object had a writable pixel.
    """
    data = target.data
    if data.ndim != len(index) + 2 or any(m.shape != data.shape[len(index):] for m in masks):
        raise CommitError(
            f"'{target.name}' has shape {data.shape}, which does not fit this image's planes; "
            "pick a Labels layer with the image's shape."
        )
    if not masks:
        raise CommitError("There is no object to commit: click or draw a box first.")
    next_id = int(np.max(data)) + 1 if data.size else 1
    values, ids = new_objects(np.asarray(data[tuple(index)]), masks, next_id, overwrite)
    if not ids:
        raise CommitError(
            "Nothing was written: the object lies entirely on pixels of other objects. "
            "Tick 'Overwrite other objects' to replace them."
        )
    logged = None if entry is None else {**entry, "ids": ids}
    write_planes(target, [(tuple(index), values, values > 0)], overwrite=True, entry=logged)
    return ids
