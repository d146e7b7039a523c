"""The Automatic tab's mode: every plane on its own (linked through z) or tracked from a key plane.

"tracked from key plane" segments one plane automatically (the viewer's current slice unless
another key slice is chosen) and carries every object it finds through z with the Propagate
tab's engine, in :func:`~napari_sam3_onnx.api.automatic_tracked.iter_segment_tracked` (the loop
``api.automatic_tracked.segment_all_tracked`` and ``segment-all --propagate-from`` run): SAM 3's
video memory when the bundle has memory graphs, else the prompt carry-over, which the mode's
method line says before a run and the status line after it. The planes arrive as the per-plane
mode's do, so the preview, Commit and Discard are the same. Only images with a slice axis show
the choice; a 4-D image is walked along z, at the time point the viewer shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from napari.layers import Image
from qtpy.QtWidgets import QComboBox, QFormLayout, QLabel, QSpinBox, QWidget

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.qt_widgets import wrapped_label
from napari_sam3_onnx.api.automatic_tracked import TrackedRun, iter_segment_tracked
from napari_sam3_onnx.api.propagation_report import axis_names, method_text
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.automatic import AutoMaskSettings
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.models.base import Capability, SamAdapter

LINKED, TRACKED = "linked", "tracked"
MODES = ((LINKED, "per plane (linked)"), (TRACKED, "tracked from key plane"))
CURRENT = "current slice"
CARRY_OVER_NOTE = ("This bundle has no memory graphs, so the objects were carried by prompt "
                   "carry-over (lighter, less robust than SAM 3's video memory).")


@dataclass(frozen=True)
class TrackedJob:
    """One tracked run's planes: ``refs`` along the walked axis, ``key`` a position in them."""

    refs: list[SliceRef]
    key: int
    axis_name: str

    @property
    def key_index(self) -> tuple[int, ...]:
        """The key plane's leading indices."""
        return tuple(self.refs[self.key].index)


def tracked_job(image: Image, current: tuple[int, ...], key: int | None,
                data_version) -> TrackedJob:
    """The planes of ``image`` along its last leading axis (z), the other axes at ``current``.

    ``key`` is the key plane's position along that axis (None: the one the viewer shows). The
    references carry the image's data version, so they share the other tabs' cache keys.
    """
    lead = layers.plane_shape(image)[:len(current)]
    axis = len(lead) - 1
    fixed = current[:axis] + current[axis + 1:]
    refs = layers.refs_along(image, axis, fixed, data_version)
    return TrackedJob(refs, current[axis] if key is None else int(key), axis_names(len(lead))[axis])


def iter_tracked(workspace: Workspace, job: TrackedJob, settings: AutoMaskSettings,
                 cancelled: Callable[[], bool]):
    """The worker's generator: the API's tracked loop on the dock's workspace."""
    return (yield from iter_segment_tracked(workspace, job.refs, job.key, settings=settings,
                                            cancelled=cancelled))


def tracked_message(run: TrackedRun | None, job: TrackedJob, objects: int, planes: int) -> str:
    """The status line when a tracked run has ended (``objects``, ``planes``: in the preview)."""
    where = f"{job.axis_name}={job.key}"
    if run is None:
        return "The run ended without a result."
    if run.propagation is None:
        if run.cancelled:
            return f"Cancelled while segmenting the key slice {where}; nothing to preview."
        return (f"No object found on the key slice {where}: nothing to carry through the "
                "stack. Choose another key slice, or loosen the settings.")
    head = f"Cancelled after {planes} of {len(job.refs)} slice(s). " if run.cancelled else ""
    method = "SAM memory" if run.method == "memory" else "prompt carry-over"
    note = f" {CARRY_OVER_NOTE}" if run.method == "carry-over" else ""
    return (f"{head}{objects} object(s) of {where} carried through {planes} slice(s) "
            f"({method}); Commit writes them (one undo step), Discard drops them.{note}")


class ModeControl(QWidget):
    """Mode, key slice and the propagation method (shown only for images with a slice axis)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = QComboBox()
        for key, title in MODES:
            self.mode.addItem(title, key)
        self.mode.setToolTip("per plane: every slice segmented on its own, objects linked "
                             "through z by overlap; tracked: one key slice segmented, each "
                             "object carried through z (one id per object)")
        self.key = QSpinBox()
        self.key.setRange(-1, 0)
        self.key.setSpecialValueText(CURRENT)  # -1: the slice the viewer shows
        self.key.setValue(-1)
        self.key_label = QLabel("Key slice")
        self.method = wrapped_label("")
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Mode", self.mode)
        form.addRow(self.key_label, self.key)
        form.addRow(self.method)
        self.mode.currentIndexChanged.connect(lambda _i: self._show())
        self._show()

    @property
    def tracked(self) -> bool:
        """Whether "tracked from key plane" is chosen (and offered)."""
        return not self.isHidden() and self.mode.currentData() == TRACKED

    def set_tracked(self, on: bool) -> None:
        """Choose a mode programmatically."""
        self.mode.setCurrentIndex(1 if on else 0)

    @property
    def key_choice(self) -> int | None:
        """The chosen key slice (None: the viewer's current slice)."""
        return None if self.key.value() < 0 else self.key.value()

    def update_for(self, image: Image | None, adapter: SamAdapter | None) -> None:
        """Show the choice for an image with a slice axis; the key's range; the method line."""
        lead = () if image is None else layers.plane_shape(image)[:image.ndim - 2]
        self.setVisible(bool(lead))
        if lead:
            self.key.setMaximum(max(lead[-1] - 1, 0))
            self.key_label.setText(f"Key slice ({axis_names(len(lead))[-1]})")
        memory = adapter is not None and adapter.has(Capability.MEMORY)
        self.method.setText("" if adapter is None else "Method: " + method_text(
            "memory" if memory else "carry-over"))
        self._show()

    def _show(self) -> None:
        on = self.mode.currentData() == TRACKED
        for w in (self.key, self.key_label, self.method):
            w.setVisible(on)
