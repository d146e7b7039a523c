"""Points and Shapes layers -> clicks and boxes on the plane the viewer shows.

Only prompts on the plane the viewer shows count; prompts on other planes wait there; shapes
other than rectangles (ellipses, polygons, ...) are ignored with a note. How clicks and boxes
become objects is :func:`napari_sam3_onnx.api.prompts.group_objects` (no napari).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from napari.layers import Image, Points, Shapes

from napari_sam3_onnx._napari.layers import FEATURE, layer_to_image_data, on_plane
from napari_sam3_onnx.api.prompts import box_from_corners

#: napari data-event actions announcing a change not made yet (the finished one follows). A
#: rectangle being drawn is "adding" from the mouse press (a tiny starting rectangle) until the
#: release ("added"): until then it is no prompt.
IN_PROGRESS = frozenset({"adding", "changing", "removing"})


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
        box = box_from_corners(coords[:, -2:])
        if box is None:
            continue
        boxes.append(box)
        rows.append(i)
    return boxes, np.asarray(rows, int), other


def plane_rows(layer: Points | Shapes, image: Image, index: tuple[int, ...]) -> np.ndarray:
    """Indices of every point or shape (of any type) lying on plane ``index``."""
    if isinstance(layer, Points):
        return np.flatnonzero(on_plane(layer_to_image_data(layer, layer.data, image), index))
    return np.asarray([i for i, verts in enumerate(layer.data)
                       if on_plane(layer_to_image_data(layer, verts, image), index).all()], int)
