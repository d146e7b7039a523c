"""Points and Shapes layers -> the engine's :class:`~napari_sam3_onnx.engine.interactive.Prompt`.

Rules (one place, so the widget and the docs agree):

* only prompts on the plane the viewer shows count; prompts on other planes wait there;
* no rectangle: all clicks form one object;
* rectangles: one object per rectangle; each click refines the rectangle that contains it (the
  most recently drawn one when several do, or when none does);
* other shapes (ellipses, polygons, ...) are ignored with a note.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
from napari.layers import Image, Points, Shapes

from napari_sam3_onnx._napari.layers import FEATURE, layer_to_image_data, on_plane
from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt

#: napari data-event actions announcing a change not made yet (the finished one follows). A
#: rectangle being drawn is "adding" from the mouse press (a tiny starting rectangle) until the
#: release ("added"): until then it is no prompt.
IN_PROGRESS = frozenset({"adding", "changing", "removing"})

#: A rectangle whose sides are both at most this long (plane pixels) has zero size: a click in
#: rectangle mode, not a box.
ZERO_SIZE = 1e-6


def change_action(event) -> str:
    """The action of a napari data event (``"added"``, ``"adding"``, ...; ``""`` if none)."""
    return str(getattr(event, "action", "") or "")


def read_clicks(
    points: Points, image: Image, index: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clicks on plane ``index``.

    Returns
    -------
    rc : numpy.ndarray
        ``(N, 2)`` ``(row, col)`` on the plane.
    labels : numpy.ndarray
        ``(N,)`` int, 1 positive, 0 negative.
    rows : numpy.ndarray
        ``(N,)`` indices of those points in the layer (for removing them later).
    """
    coords = layer_to_image_data(points, points.data, image)
    keep = on_plane(coords, index)
    if FEATURE in points.features:
        labels = np.asarray(points.features[FEATURE], bool).astype(np.int64)
    else:
        labels = np.ones(len(coords), np.int64)
    return coords[keep][:, -2:], labels[keep], np.flatnonzero(keep)


def read_boxes(
    shapes: Shapes, image: Image, index: tuple[int, ...], skip: Collection[int] = ()
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """Rectangles on plane ``index`` as ``(r0, c0, r1, c1)`` in plane pixels.

    Rectangles of zero size (all corners on one point) are left out silently, like the rows in
    ``skip`` (the rectangle napari is still drawing): neither is a prompt yet.

    Returns
    -------
    boxes : list of numpy.ndarray
        One ``(4,)`` array per rectangle, in drawing order.
    rows : numpy.ndarray
        Indices of those rectangles in the layer.
    other : int
        Number of non-rectangle shapes on the plane (ignored).
    """
    boxes, rows, other = [], [], 0
    for i, (verts, kind) in enumerate(zip(shapes.data, shapes.shape_type, strict=True)):
        coords = layer_to_image_data(shapes, verts, image)
        if i in skip or not on_plane(coords, index).all():
            continue
        if kind != "rectangle":
            other += 1
            continue
        rc = coords[:, -2:]
        lo, hi = rc.min(axis=0), rc.max(axis=0)
        if np.all(hi - lo <= ZERO_SIZE):
            continue
        boxes.append(np.array([lo[0], lo[1], hi[0], hi[1]]))
        rows.append(i)
    return boxes, np.asarray(rows, int), other


def plane_rows(layer: Points | Shapes, image: Image, index: tuple[int, ...]) -> np.ndarray:
    """Indices of every point or shape (of any type) lying on plane ``index``."""
    if isinstance(layer, Points):
        return np.flatnonzero(on_plane(layer_to_image_data(layer, layer.data, image), index))
    return np.asarray([i for i, verts in enumerate(layer.data)
                       if on_plane(layer_to_image_data(layer, verts, image), index).all()], int)


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
