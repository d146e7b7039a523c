"""Widgets that keep the dock's width fixed whatever they show.

Long layer names in a combo box, or a long message, must not widen the dock: the canvas beside
it would shrink and the image jump. Combos show ~:data:`COMBO_CHARS` characters and elide
the rest (the full name is in the drop-down list).
"""

from __future__ import annotations

from qtpy.QtWidgets import QComboBox, QSizePolicy

#: Characters a layer combo box is sized for.
COMBO_CHARS = 10


def compact_combo() -> QComboBox:
    """A combo box whose width does not follow its longest item."""
    combo = QComboBox()
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(COMBO_CHARS)
    combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    return combo


#: Narrowest a spin box may get (its own hint is sized for its largest value and suffix).
SPIN_MIN_WIDTH = 64


def compact(widget):
    """Let ``widget`` shrink below its size hint, down to :data:`SPIN_MIN_WIDTH` (returns it)."""
    widget.setMinimumWidth(SPIN_MIN_WIDTH)
    widget.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
    return widget
