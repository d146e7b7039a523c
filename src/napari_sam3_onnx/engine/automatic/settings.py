"""Settings of automatic ("segment everything") masks, named as SAM's generator names them.

Names and defaults are those of ``SamAutomaticMaskGenerator.__init__`` in Meta's
segment-anything (``segment_anything/automatic_mask_generator.py``): ``points_per_side=32``,
``points_per_batch=64``, ``pred_iou_thresh=0.88``, ``stability_score_thresh=0.95``,
``stability_score_offset=1.0``, ``box_nms_thresh=0.7``, ``crop_n_layers=0``,
``crop_nms_thresh=0.7``, ``crop_overlap_ratio=512/1500``, ``crop_n_points_downscale_factor=1``,
``min_mask_region_area=0``. SAM 2's generator keeps the same names (some defaults differ);
``docs/automatic.md`` lists what our implementation does differently and why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class AutoMaskSettings:
    """How a plane is covered with point prompts and which masks are kept.

    Attributes
    ----------
    points_per_side : int
        The grid has ``points_per_side ** 2`` single positive clicks on the (crop of the) plane.
    points_per_batch : int
        Clicks decoded per decoder call where the bundle's decoder takes a batch (else one by
        one); it changes speed and memory, never the result.
    pred_iou_thresh : float
        Keep masks whose predicted IoU (the decoder's own quality estimate) exceeds it.
    stability_score_thresh : float
        Keep masks whose stability score exceeds it.
    stability_score_offset : float
        Logit offset of the stability score ``#(logit > +offset) / #(logit > -offset)``.
    box_nms_thresh : float
        Box IoU above which the lower-scoring of two masks of one crop is a duplicate.
    crop_n_layers : int
        Extra layers of overlapping crops (layer ``i`` cuts the plane into ``2**i x 2**i``
        crops, each encoded on its own); 0 = the whole plane only.
    crop_nms_thresh : float
        Box IoU above which masks of different crops are duplicates (the smaller crop wins).
    crop_overlap_ratio : float
        Overlap of neighbouring crops as a fraction of the plane's short side (first layer).
    crop_n_points_downscale_factor : int
        Crop layer ``i`` uses ``points_per_side / factor**i`` points per side.
    min_mask_region_area : int
        Holes and islands (disconnected pieces) smaller than this many plane pixels are
        removed from each mask; 0 = off.

    Examples
    --------
    >>> fast = api.AutoMaskSettings(points_per_side=16, pred_iou_thresh=0.8)
    >>> seg = api.segment_all(bundle, stack, settings=fast)      # SAM's generator's names
    """

    points_per_side: int = 32
    points_per_batch: int = 64
    pred_iou_thresh: float = 0.88
    stability_score_thresh: float = 0.95
    stability_score_offset: float = 1.0
    box_nms_thresh: float = 0.7
    crop_n_layers: int = 0
    crop_nms_thresh: float = 0.7
    crop_overlap_ratio: float = 512 / 1500
    crop_n_points_downscale_factor: int = 1
    min_mask_region_area: int = 0

    def __post_init__(self) -> None:
        if self.points_per_side < 1:
            raise ValueError(f"points_per_side must be >= 1, got {self.points_per_side}")
        if self.points_per_batch < 1:
            raise ValueError(f"points_per_batch must be >= 1, got {self.points_per_batch}")
        if self.crop_n_layers < 0:
            raise ValueError(f"crop_n_layers must be >= 0, got {self.crop_n_layers}")
        if self.crop_n_points_downscale_factor < 1:
            raise ValueError("crop_n_points_downscale_factor must be >= 1")
        if self.min_mask_region_area < 0:
            raise ValueError("min_mask_region_area must be >= 0")
        for name in ("box_nms_thresh", "crop_nms_thresh"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")

    def as_dict(self) -> dict:
        """The settings as a plain dict (for a run's record)."""
        return asdict(self)
