"""Qt widgets built already configured, with types a checker can follow.

PyQt accepts Qt properties as constructor keywords (``QLabel(text, wordWrap=True)``), but the
Qt stubs do not describe them, so such calls cannot be type-checked. These builders call the
setters instead; the widgets are the same.
"""

from __future__ import annotations

from qtpy.QtWidgets import QDoubleSpinBox, QLabel, QSpinBox


def wrapped_label(text: str = "") -> QLabel:
    """A label that wraps long text onto several lines instead of widening the dock."""
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def spin_box(lo: int, hi: int, value: int | None = None, *, prefix: str = "",
             suffix: str = "") -> QSpinBox:
    """An integer spin box over ``[lo, hi]`` showing ``value`` (``lo`` when None)."""
    box = QSpinBox()
    box.setRange(lo, hi)
    if value is not None:
        box.setValue(value)
    box.setPrefix(prefix)
    box.setSuffix(suffix)
    return box


def double_spin_box(value: float, lo: float, hi: float, step: float,
                    decimals: int = 3) -> QDoubleSpinBox:
    """A spin box over ``[lo, hi]`` in steps of ``step``, ``decimals`` digits, at ``value``."""
    box = QDoubleSpinBox()
    box.setDecimals(decimals)  # before the range and value, which it rounds
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setValue(value)
    return box
