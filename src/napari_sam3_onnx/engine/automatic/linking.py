"""3-D objects from per-plane labels: link each plane's objects to the previous plane's by IoU.

Planes are segmented one at a time (automatic masks or text search); an object on plane ``z``
keeps the id of the object on plane ``z - 1`` it overlaps best, when their IoU exceeds
``link_iou`` (optimal one-to-one matching, :func:`~..evaluation.match_pairs`, so two neighbours
are never merged into one id and one object never takes two); an unmatched object starts a new
id. The default threshold, 0.3, is lower than the 0.5 of instance matching because consecutive
sections of one object change size and drift (a nucleus's cap is much smaller than its middle);
an object that vanishes for a plane ends, and one that reappears gets a new id.
"""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.engine.evaluation import match_pairs, overlap_iou

#: IoU above which an object continues the previous plane's object.
LINK_IOU = 0.3


def relabel(labels: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
    """``labels`` with each id replaced by ``mapping[id]`` (ids not in it become 0)."""
    if not mapping:
        return np.zeros_like(labels)
    top = max(int(labels.max()), max(mapping))
    lut = np.zeros(top + 1, labels.dtype)
    for old, new in mapping.items():
        lut[old] = new
    return lut[labels]


class PlaneLinker:
    """Gives the objects of consecutive planes ids that are consistent through the stack.

    Parameters
    ----------
    link_iou : float
        IoU above which an object continues the previous plane's object.
    first_id : int
        The first new id.
    """

    def __init__(self, link_iou: float = LINK_IOU, first_id: int = 1) -> None:
        if not 0.0 <= link_iou < 1.0:
            raise ValueError(f"link_iou must be in [0, 1), got {link_iou}")
        self.link_iou = float(link_iou)
        self.next_id = int(first_id)
        self._previous: np.ndarray | None = None
        self._previous_index: tuple[int, ...] | None = None

    def follows(self, index: tuple[int, ...]) -> bool:
        """Whether plane ``index`` comes right after the last linked plane (same other axes)."""
        prev = self._previous_index
        return (prev is not None and len(prev) == len(index) > 0
                and prev[:-1] == index[:-1] and index[-1] == prev[-1] + 1)

    def link(self, labels: np.ndarray, index: tuple[int, ...]) -> dict[int, int]:
        """The new id of each object of plane ``index`` (``labels``: its per-plane ids).

        Returns
        -------
        dict[int, int]
            Per-plane id -> stack id (apply with :func:`relabel`). The linker remembers the
            relabelled plane for the next call.
        """
        ids = [int(i) for i in np.unique(labels) if i != 0]
        mapping: dict[int, int] = {}
        if self._previous is not None and self.follows(index) and ids:
            iou, prev_ids, cur_ids = overlap_iou(self._previous, labels)
            for r, c in match_pairs(iou, self.link_iou):
                mapping[int(cur_ids[c])] = int(prev_ids[r])
        for i in ids:
            if i not in mapping:
                mapping[i] = self.next_id
                self.next_id += 1
        self._previous = relabel(labels, mapping)
        self._previous_index = tuple(index)
        return mapping
