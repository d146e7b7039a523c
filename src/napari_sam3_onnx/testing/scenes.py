"""Synthetic test images with bright blobs at known places, and where they land in model space.

The default scene is deliberately non-square (60 rows x 90 columns) with a background that is
darker on the left and top than on the right and bottom, so a transposed or flipped axis anywhere
in a pipeline moves the blobs and their brightness. Each blob sits well inside one cell of the
toy detector's 4 x 4 query grid (:mod:`napari_sam3_onnx.toy.concepts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..models.base import Detections


@dataclass(frozen=True)
class Blob:
    """An axis-aligned bright rectangle: rows ``r0:r1``, columns ``c0:c1``, uint8 ``value``."""

    name: str
    r0: int
    r1: int
    c0: int
    c1: int
    value: int

    def box_xyxy(self, shape: tuple[int, int]) -> np.ndarray:
        """``(4,)`` float32 ``(x0, y0, x1, y1)`` normalised by the image ``(rows, cols)``."""
        rows, cols = shape
        return np.array([self.c0 / cols, self.r0 / rows, self.c1 / cols, self.r1 / rows],
                        np.float32)

    def box_cxcywh(self, shape: tuple[int, int], shrink: float = 1.0) -> np.ndarray:
        """``(4,)`` float32 ``(cx, cy, w, h)`` normalised, the size scaled by ``shrink``."""
        x0, y0, x1, y1 = self.box_xyxy(shape)
        return np.array([(x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) * shrink, (y1 - y0) * shrink],
                        np.float32)

    def centre_xy(self, shape: tuple[int, int], input_size: tuple[int, int]) -> np.ndarray:
        """``(2,)`` float32 ``(x, y)`` of the blob centre in model-input pixels (stretched)."""
        rows, cols = shape
        return np.array([(self.c0 + self.c1) / 2 * input_size[1] / cols,
                         (self.r0 + self.r1) / 2 * input_size[0] / rows], np.float32)

    def centre_rc(self, grid: int, shape: tuple[int, int]) -> tuple[int, int]:
        """``(row, col)`` of the blob centre on a ``grid x grid`` raster of the image."""
        rows, cols = shape
        return (int((self.r0 + self.r1) / 2 * grid / rows),
                int((self.c0 + self.c1) / 2 * grid / cols))


#: Two bright blobs (value 235), one mid-grey blob (150) and a small bright speck whose cell
#: holds too few bright pixels to pass SAM 3's 0.5 score cut in the toy detector.
BLOBS = (
    Blob("bright_top_left", 2, 13, 4, 19, 235),
    Blob("bright_right", 17, 28, 70, 87, 235),
    Blob("mid_centre", 32, 44, 47, 64, 150),
    Blob("speck", 50, 53, 29, 32, 235),
)


def planted_image(
    shape: tuple[int, int] = (60, 90), blobs: tuple[Blob, ...] = BLOBS
) -> np.ndarray:
    """``(rows, cols, 3)`` uint8 RGB: a dark gradient (values 10-40) with ``blobs`` painted in."""
    rows, cols = shape
    r, c = np.mgrid[0:rows, 0:cols].astype(np.float32)
    background = 10 + 20 * c / cols + 10 * r / rows
    img = np.repeat(background[..., None], 3, axis=2)
    for blob in blobs:
        img[blob.r0:blob.r1, blob.c0:blob.c1] = blob.value
    img[..., 1] += 2  # channels differ slightly: brightness is their mean
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def brightness(rgb: np.ndarray) -> np.ndarray:
    """``(rows, cols)`` float32 mean of RGB / 255: what the test encoders compute."""
    return rgb.astype(np.float32).mean(axis=2) / 255.0


#: The blobs a concept search should find (the speck stays below the 0.5 cut).
INSTANCES = BLOBS[:3]
SPECK = BLOBS[3]


def binary_masks(masks: np.ndarray, kind: str) -> np.ndarray:
    """Threshold masks as :class:`~napari_sam3_onnx.models.base.Detections` says for ``kind``."""
    return masks > 0.0 if kind == "logits" else masks > 0.5


def check_instances(
    det: Detections, blobs: Sequence[Blob], shape: tuple[int, int], floor: float = 0.5
) -> None:
    """Assert that the detections scoring above ``floor`` are exactly ``blobs``.

    Each blob must have one detection whose box is within one mask pixel (+2 %) of the blob's
    normalised box and whose mask holds the blob centre and none of the other blobs' centres.
    """
    keep = det.scores > max(floor, det.min_score)
    boxes = det.boxes[keep]
    masks = binary_masks(det.masks[keep], det.mask_kind)
    assert len(boxes) == len(blobs), f"expected {len(blobs)} instances, got {len(boxes)}"
    size = masks.shape[-1]
    tol = 1.0 / size + 0.02
    for blob in blobs:
        err = np.abs(boxes - blob.box_xyxy(shape)).max(axis=1)
        i = int(np.argmin(err))
        assert err[i] <= tol, f"{blob.name}: box {boxes[i]} vs {blob.box_xyxy(shape)}"
        assert masks[i][blob.centre_rc(size, shape)], f"{blob.name}: centre not in its mask"
        for other in INSTANCES:
            if other is not blob:
                assert not masks[i][other.centre_rc(size, shape)], f"{blob.name} has {other.name}"
