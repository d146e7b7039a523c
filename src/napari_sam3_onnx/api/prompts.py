"""Clicks and rectangles on one plane -> one engine prompt per object (no napari).

Rules (one place, so the widget and the docs agree):

* no rectangle: all clicks form one object;
* rectangles: one object per rectangle; each click refines the rectangle that contains it (the
  most recently drawn one when several do, or when none does);
* a rectangle of zero size (all corners on one point) is a click in rectangle mode, not a box.

SAM refines an object by feeding its previous low-res logits back with new clicks
(:func:`with_feedback`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..engine.interactive import ObjectMask, Prompt

#: A rectangle whose sides are both at most this long (plane pixels) has zero size.
ZERO_SIZE = 1e-6


def box_from_corners(corners_rc) -> np.ndarray | None:
    """The ``(4,)`` float64 box ``(r0, c0, r1, c1)`` around ``(N, 2)`` ``(row, col)`` corners.

    None when it has zero size (both sides at most :data:`ZERO_SIZE`).
    """
    rc = np.asarray(corners_rc, np.float64).reshape(-1, 2)
    lo, hi = rc.min(axis=0), rc.max(axis=0)
    if np.all(hi - lo <= ZERO_SIZE):
        return None
    return np.array([lo[0], lo[1], hi[0], hi[1]])


@dataclass(frozen=True)
class ObjectPrompt:
    """The prompts of one object on one plane.

    Attributes
    ----------
    key : tuple
        Identifies the object between runs: the box corners, or ``()`` for clicks only.
    prompt : Prompt
        Clicks and/or box in plane coordinates (without feedback logits).
    """

    key: tuple
    prompt: Prompt


def group_objects(
    clicks_rc: np.ndarray, labels: np.ndarray, boxes: list[np.ndarray]
) -> list[ObjectPrompt]:
    """Split one plane's clicks and rectangles into objects (rules in the module docstring)."""
    clicks_rc = np.asarray(clicks_rc, np.float64).reshape(-1, 2)
    if not boxes:
        if len(clicks_rc) == 0:
            return []
        return [ObjectPrompt((), Prompt.clicks(clicks_rc, labels))]
    owner = np.full(len(clicks_rc), len(boxes) - 1)
    for j, (r, c) in enumerate(clicks_rc):
        for b in range(len(boxes) - 1, -1, -1):
            r0, c0, r1, c1 = boxes[b]
            if r0 <= r <= r1 and c0 <= c <= c1:
                owner[j] = b
                break
    objects = []
    for b, box in enumerate(boxes):
        mine = owner == b
        key = tuple(round(float(v), 3) for v in box)
        objects.append(ObjectPrompt(key, Prompt.clicks(clicks_rc[mine], labels[mine], box)))
    return objects


def with_feedback(
    obj: ObjectPrompt, previous: Mapping[tuple, tuple[Prompt, ObjectMask]]
) -> Prompt:
    """The object's prompt, carrying the last result's low-res logits when it only added clicks.

    SAM refines an object by feeding its previous low-res logits back with the new clicks. That
    is only right when the new prompt extends the old one (same box, old clicks first, in the
    same order); after a click is moved or removed the old logits would pull the mask back.
    """
    prev = previous.get(obj.key)
    if prev is None:
        return obj.prompt
    old, result = prev
    new = obj.prompt
    n = len(old.labels)
    extends = (
        len(new.labels) > n
        and np.array_equal(new.points_rc[:n], old.points_rc)
        and np.array_equal(new.labels[:n], old.labels)
    )
    if not extends:
        return new
    return Prompt(new.points_rc, new.labels, new.box_rc, result.low_res_logits, result.region)
