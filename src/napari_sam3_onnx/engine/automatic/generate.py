"""Automatic masks on one plane: a grid of single clicks, filtered as SAM's generator does.

Per crop (the whole plane, then ``crop_n_layers`` layers of overlapping crops, each encoded as a
region of the plane): a grid of positive clicks, decoded in batches of ``points_per_batch``;
every multimask output of every click is a candidate. A candidate is kept when the decoder says
the object is present, its predicted IoU exceeds ``pred_iou_thresh`` and its stability score
exceeds ``stability_score_thresh``; on a crop smaller than the plane, masks touching an inner
crop edge are dropped (a cut object is found whole on a larger crop). Survivors are upsampled
to plane pixels only inside their own window, and duplicates removed by box NMS
(``box_nms_thresh``) by predicted IoU, then across crops (``crop_nms_thresh``) preferring the
smaller crop. With ``min_mask_region_area`` small holes and islands are removed and NMS is run
again, preferring masks that did not change (SAM's order).

Differences from SAM's generator, on purpose: the stability score is computed on the decoder's
low-resolution logits (288 x 288 in SAM 3) instead of logits upsampled to the image; the score
is the same fraction of a band around the contour, and upsampling every candidate of a
1,024-point grid to the image would cost more than the decoder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from napari_sam3_onnx.engine.automatic.grid import crop_boxes, layer_points_per_side, point_grid
from napari_sam3_onnx.engine.automatic.masks import (
    box_nms,
    mask_box,
    remove_small_regions,
    stability_scores,
)
from napari_sam3_onnx.engine.automatic.settings import AutoMaskSettings
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.postprocess import upsample_crop
from napari_sam3_onnx.engine.tiling.tiled import with_plane_window
from napari_sam3_onnx.engine.tiling.tiles import Box
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter
from napari_sam3_onnx.models.roles import predict_point_batch

#: Pixels within which a mask's box counts as touching a crop edge (SAM's ``atol``).
CROP_EDGE_TOL = 20.0


@dataclass
class AutoMask:
    """One kept mask, in plane pixels.

    Attributes
    ----------
    window : Box
        Half-open ``(r0, c0, r1, c1)`` of ``mask`` on the plane.
    mask : numpy.ndarray
        ``(r1 - r0, c1 - c0)`` bool.
    score : float
        The decoder's predicted IoU.
    stability : float
        SAM's stability score.
    crop : Box
        The crop (or tile) it was found on.
    point_rc : tuple[float, float]
        The click that produced it, plane ``(row, col)``.
    """

    window: Box
    mask: np.ndarray
    score: float
    stability: float
    crop: Box
    point_rc: tuple[float, float]

    @property
    def box(self) -> np.ndarray:
        """``(4,)`` inclusive ``(r0, c0, r1, c1)`` of the mask's pixels on the plane."""
        b = mask_box(self.mask)
        if b is None:
            return np.zeros(4)
        return np.array([b[0] + self.window[0], b[1] + self.window[1],
                         b[2] + self.window[0], b[3] + self.window[1]], np.float64)

    @property
    def area(self) -> int:
        """Pixels of the mask."""
        return int(np.count_nonzero(self.mask))


def decode_clicks(
    adapter: SamAdapter, embedding: Embedding, points_xy: np.ndarray, batch: int
) -> Iterator[tuple[int, np.ndarray, np.ndarray, float]]:
    """Decode each point as one positive click, in batches.

    Yields
    ------
    (int, numpy.ndarray, numpy.ndarray, float)
        The point's index, its multimask candidates' ``(K, h, w)`` float32 logits and ``(K,)``
        predicted IoUs, and the object-score logit.
    """
    for start in range(0, len(points_xy), batch):
        chunk = points_xy[start:start + batch]
        for k, cands in enumerate(predict_point_batch(adapter.prompt_decoder, embedding, chunk)):
            first = 1 if cands.single_mask_first else 0
            yield (start + k, cands.logits[first:], np.asarray(cands.iou[first:]),
                   float(cands.object_score))


def _near_inner_edge(box: np.ndarray, crop: Box, outer: Box) -> bool:
    """SAM's ``is_box_near_crop_edge``: the box touches a crop edge that is not an outer edge.

    ``outer`` is the rectangle being covered (the plane, or the tile when tiled: a mask cut by
    a tile edge is kept, the tiles' merge joins it).
    """
    crop_edges = np.array(crop, np.float64)
    plane_edges = np.array(outer, np.float64)
    near_crop = np.abs(box - crop_edges) <= CROP_EDGE_TOL
    near_plane = np.abs(box - plane_edges) <= CROP_EDGE_TOL
    return bool((near_crop & ~near_plane).any())


def masks_on_crop(
    adapter: SamAdapter,
    embedding: Embedding,
    crop: Box,
    points_per_side: int,
    outer: Box,
    settings: AutoMaskSettings,
    cancelled: Callable[[], bool] | None = None,
) -> list[AutoMask]:
    """The masks one encoded crop gives, filtered and de-duplicated within the crop.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``clicks`` capability.
    embedding : Embedding
        The crop's embedding (``embedding.image_shape`` is the crop's ``(rows, cols)``).
    crop : Box
        ``(r0, c0, r1, c1)`` of the crop on the plane.
    points_per_side : int
        Grid size on this crop.
    outer : Box
        The rectangle all crops cover (the plane, or a tile of it).
    settings : AutoMaskSettings
        Thresholds.
    cancelled : callable, optional
        Checked between decoder batches; True returns what was kept so far.
    """
    if not adapter.has(Capability.CLICKS):
        adapter.require(Capability.CLICKS)
    rows, cols = crop[2] - crop[0], crop[3] - crop[1]
    grid = point_grid(points_per_side)
    in_h, in_w = embedding.input_size
    points_xy = (grid * np.array([in_w, in_h])).astype(np.float32)
    whole = crop == outer
    kept: list[AutoMask] = []
    batch = settings.points_per_batch
    for start in range(0, len(points_xy), batch):
        if cancelled is not None and cancelled():
            break
        for i, logits, ious, present in decode_clicks(
                adapter, embedding, points_xy[start:start + batch], batch):
            if present <= 0:
                continue
            stab = stability_scores(logits, settings.stability_score_offset)
            for k in np.flatnonzero((ious > settings.pred_iou_thresh)
                                    & (stab > settings.stability_score_thresh)):
                hit = upsample_crop(logits[k], (rows, cols))
                if hit is None or not hit[1].any():
                    continue
                (r0, r1, c0, c1), m = hit
                x, y = grid[start + i]
                am = AutoMask((r0 + crop[0], c0 + crop[1], r1 + crop[0], c1 + crop[1]), m,
                              float(ious[k]), float(stab[k]), crop,
                              (float(y * rows + crop[0]), float(x * cols + crop[1])))
                if not whole and _near_inner_edge(am.box, crop, outer):
                    continue
                kept.append(am)
    return nms(kept, settings.box_nms_thresh)


def nms(masks: list[AutoMask], iou_thresh: float, scores=None) -> list[AutoMask]:
    """Box NMS over masks (by predicted IoU unless ``scores`` are given), best first."""
    if len(masks) <= 1:
        return list(masks)
    boxes = np.stack([m.box for m in masks])
    s = np.array([m.score for m in masks]) if scores is None else np.asarray(scores)
    return [masks[i] for i in box_nms(boxes, s, iou_thresh)]


def clean_regions(masks: list[AutoMask], settings: AutoMaskSettings) -> list[AutoMask]:
    """Remove small holes and islands, then NMS again preferring unchanged masks (SAM's order)."""
    if settings.min_mask_region_area <= 0 or not masks:
        return masks
    out, unchanged = [], []
    for m in masks:
        cleaned, changed = remove_small_regions(m.mask, settings.min_mask_region_area)
        if cleaned.any():
            out.append(replace(m, mask=cleaned))
            unchanged.append(0.0 if changed else 1.0)
    keep = nms(out, settings.box_nms_thresh, unchanged)
    return sorted(keep, key=lambda m: -m.score)


def generate_masks(
    adapter: SamAdapter,
    embed: Callable[[SliceRef], Embedding],
    ref: SliceRef,
    settings: AutoMaskSettings | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[AutoMask]:
    """Every mask SAM's automatic generator keeps on one plane (or one region of it).

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``clicks`` capability.
    embed : callable
        ``ref -> Embedding`` (e.g. ``SliceEncoder.embed``): the whole plane or region is embedded
        through it once, each extra crop once.
    ref : SliceRef
        The plane; with a ``region`` (a tile) only that rectangle is covered, and crops are
        cut inside it.
    settings : AutoMaskSettings, optional
        Defaults: SAM's.
    cancelled : callable, optional
        Checked between decoder batches and crops.

    Returns
    -------
    list of AutoMask
        Best predicted IoU first; masks may overlap (see :func:`paint`).
    """
    settings = settings or AutoMaskSettings()
    plane_shape = ref.plane_shape
    base = ref.region or (0, 0, plane_shape[0], plane_shape[1])
    if settings.crop_n_layers > 0:
        ref = with_plane_window(ref)  # every crop contrasted as the whole plane
    local = crop_boxes((base[2] - base[0], base[3] - base[1]), settings.crop_n_layers,
                       settings.crop_overlap_ratio)
    found: list[AutoMask] = []
    for (r0, c0, r1, c1), layer in local:
        if cancelled is not None and cancelled():
            break
        crop = (r0 + base[0], c0 + base[1], r1 + base[0], c1 + base[1])
        region = None if crop == (0, 0, *plane_shape) else crop
        emb = embed(replace(ref, region=region))
        n = layer_points_per_side(settings.points_per_side, layer,
                                  settings.crop_n_points_downscale_factor)
        found += masks_on_crop(adapter, emb, crop, n, base, settings, cancelled)
    if len(local) > 1:
        areas = [1.0 / max((m.crop[2] - m.crop[0]) * (m.crop[3] - m.crop[1]), 1) for m in found]
        found = nms(found, settings.crop_nms_thresh, areas)
    return sorted(clean_regions(found, settings), key=lambda m: -m.score)
