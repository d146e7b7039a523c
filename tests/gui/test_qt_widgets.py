"""The typed widget builders make the widgets PyQt's property keywords made, and the Automatic
tab's settings start at SAM's defaults."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gui


def test_builders_match_the_property_keywords(qtbot):
    from qtpy.QtWidgets import QDoubleSpinBox, QLabel, QSpinBox

    from napari_sam3_onnx._napari.qt_widgets import double_spin_box, spin_box, wrapped_label

    label, keyword_label = wrapped_label("long text"), QLabel("long text", wordWrap=True)
    assert label.wordWrap() and label.text() == keyword_label.text() == "long text"
    assert not QLabel("x").wordWrap()  # the builder is what makes it wrap

    box = spin_box(3, 117, 41, prefix="from ", suffix=" px")
    keyword_box = QSpinBox(minimum=3, maximum=117, value=41, prefix="from ", suffix=" px")
    for read in ("minimum", "maximum", "value", "prefix", "suffix"):
        assert getattr(box, read)() == getattr(keyword_box, read)(), read
    assert spin_box(5, 9).value() == 5  # no value: the lower bound, as Qt clamps

    fine = double_spin_box(0.875, 0.01, 0.99, 0.05)
    keyword_fine = QDoubleSpinBox(minimum=0.01, maximum=0.99, singleStep=0.05, decimals=3)
    keyword_fine.setValue(0.875)
    for read in ("minimum", "maximum", "singleStep", "decimals", "value"):
        assert getattr(fine, read)() == pytest.approx(getattr(keyword_fine, read)()), read
    assert fine.value() == pytest.approx(0.875)  # three decimals, not Qt's default two


def test_automatic_settings_start_at_sams_defaults(qtbot):
    from napari_sam3_onnx._napari.automatic.panel import SettingsBox
    from napari_sam3_onnx.engine.automatic import AutoMaskSettings
    from napari_sam3_onnx.engine.automatic.linking import LINK_IOU

    box = SettingsBox()
    qtbot.addWidget(box)
    assert box.settings() == AutoMaskSettings()
    assert box.link.isChecked() and box.link_value == pytest.approx(LINK_IOU)
    assert box.min_mask_region_area.suffix() == " px"
    box.link.setChecked(False)
    assert box.link_value is None
