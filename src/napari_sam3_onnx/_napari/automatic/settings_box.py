"""The Automatic tab's folded "Settings": SAM's generator settings in words, SAM's names as tips.

Each row says what the setting does; its tooltip gives SAM's parameter name
(:class:`~napari_sam3_onnx.engine.automatic.AutoMaskSettings`, the CLI's options) and what to do
when the result is empty or fragmented.
"""

from __future__ import annotations

from qtpy.QtWidgets import QCheckBox, QFormLayout, QLabel, QWidget

from napari_sam3_onnx._napari.qt_widgets import double_spin_box, spin_box
from napari_sam3_onnx.engine.automatic import AutoMaskSettings
from napari_sam3_onnx.engine.automatic.linking import LINK_IOU

#: (label, SAM's name, what it does) per row.
ROWS = (
    ("Clicks per side", "points_per_side",
     "The slice is covered with this many x this many single clicks; more finds smaller "
     "objects and takes longer."),
    ("Quality cut", "pred_iou_thresh",
     "Keep a mask only if the model's own quality estimate (predicted IoU) exceeds this."),
    ("Stability cut", "stability_score_thresh",
     "Keep a mask only if it barely changes when the mask threshold moves; lower it first "
     "when nothing is found."),
    ("Duplicate overlap", "box_nms_thresh",
     "Of two masks whose boxes overlap more than this, only the better one is kept."),
    ("Smallest piece", "min_mask_region_area",
     "Holes and islands smaller than this are removed from each mask (0: off)."),
    ("Crop layers", "crop_n_layers",
     "Also segment overlapping crops of the slice (finds small objects in large images)."),
)


class SettingsBox(QWidget):
    """SAM's automatic-mask-generator settings and the 3-D link, each row explained."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        d = AutoMaskSettings()
        self.points_per_side = spin_box(1, 128, d.points_per_side)
        self.pred_iou_thresh = double_spin_box(d.pred_iou_thresh, 0.0, 1.0, 0.01)
        self.stability_score_thresh = double_spin_box(d.stability_score_thresh, 0.0, 1.0, 0.01)
        self.box_nms_thresh = double_spin_box(d.box_nms_thresh, 0.01, 1.0, 0.05)
        self.min_mask_region_area = spin_box(0, 10**7, suffix=" px")
        self.crop_n_layers = spin_box(0, 3, d.crop_n_layers)
        self.link = QCheckBox("Link objects through the stack (one id per 3-D object)")
        self.link.setChecked(True)
        self.link_iou = double_spin_box(LINK_IOU, 0.0, 0.99, 0.05)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        for label, name, what in ROWS:
            field = getattr(self, name)
            tip = f"{what} (SAM's {name})"
            field.setToolTip(tip)
            row = QLabel(label)
            row.setToolTip(tip)
            form.addRow(row, field)
        form.addRow(self.link)
        form.addRow("Link overlap", self.link_iou)
        self.link_iou.setToolTip("A slice's object takes the id of the previous slice's object "
                                 "it overlaps more than this (IoU)")

    def settings(self) -> AutoMaskSettings:
        """The chosen settings (raises ValueError for a bad combination)."""
        return AutoMaskSettings(
            points_per_side=self.points_per_side.value(),
            pred_iou_thresh=self.pred_iou_thresh.value(),
            stability_score_thresh=self.stability_score_thresh.value(),
            box_nms_thresh=self.box_nms_thresh.value(),
            min_mask_region_area=self.min_mask_region_area.value(),
            crop_n_layers=self.crop_n_layers.value())

    @property
    def link_value(self) -> float | None:
        """The link IoU, None when linking is off."""
        return self.link_iou.value() if self.link.isChecked() else None
