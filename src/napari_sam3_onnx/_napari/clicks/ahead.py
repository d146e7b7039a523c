"""The dock's "Encode ahead" switch and status line: a Qt face for :mod:`engine.encode_ahead`.

:class:`AheadControl` owns one :class:`~napari_sam3_onnx.engine.encode_ahead.EncodeAhead` over
the workspace's encoder (so what it encodes lands in the shared cache and the attached store)
and is told by the Clicks session where the user is (:meth:`AheadControl.follow`). The switch
is on by default where the machine's available memory holds two more embeddings
(:func:`default_on`). The scheduler works in its own thread; a 250 ms timer on the Qt thread
copies its state into the status line ("encoding z=13 ahead", "paused: your encode first"), so
the Qt thread never waits on it. The line never changes the dock's size while the switch is on:
it stays shown (idle: "up to date") at one line's height, and its width does not follow its
text (a long image name). Hiding it when there was nothing to say and showing it again made
the dock lay itself out between two background encodes, which in a shown window resized and
redrew the viewer's canvas on the Qt thread: the longest event-loop stalls while encoding ahead
(see docs/performance.md).

With a series open (:meth:`AheadControl.follow_series`), the next image of the series comes
after the planes ahead: it is read and encoded in the scheduler's thread, and the layer that
later shows it finds that embedding (see :mod:`napari_sam3_onnx.api.series_ahead`).

Tiled planes are not encoded ahead: their prompts are answered on tiles chosen per prompt, so a
whole-plane embedding would not be used.
"""

from __future__ import annotations

from napari.layers import Image
from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QCheckBox, QLabel, QSizePolicy, QVBoxLayout, QWidget

from napari_sam3_onnx._napari.layers import image_source, index_label, plane_shape
from napari_sam3_onnx.api.clicks import clicks_need
from napari_sam3_onnx.api.series_ahead import SeriesSource
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encode_ahead import (
    EncodeAhead,
    Pending,
    SeriesHook,
    available_bytes,
    memory_allows,
)
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tiling.tiled import input_side

AHEAD_TEXT = "Encode ahead (uses idle time)"
AHEAD_TIP = ("While you look at a plane, encode it and the next planes in the direction you last "
             "moved (and the next image of a series), so stepping on shows a preview at once. "
             "It stops the moment you ask for another plane; embeddings go to the cache and to "
             "the attached store.")
#: How often the status line reads the scheduler's state.
POLL_MS = 250
#: The status line's words while encode ahead is on with nothing to do.
IDLE_TEXT = "Encode ahead: up to date"


def default_on() -> bool:
    """Whether encode ahead starts on: the available memory holds two more embeddings."""
    return memory_allows(available_bytes())


class AheadControl(QWidget):
    """The switch (:attr:`box`), the status line (:attr:`line`) and the scheduler.

    Parameters
    ----------
    workspace : Workspace
        The dock's workspace (its encoder, cache and tiling setting).
    """

    def __init__(self, workspace: Workspace, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.workspace = workspace
        self.scheduler = EncodeAhead(need=clicks_need,  # the encoder a click will use
                                     label=self._label)
        self._attached: SliceEncoder | None = None
        self._image: Image | None = None
        self.box = QCheckBox(AHEAD_TEXT)
        self.box.setToolTip(AHEAD_TIP)
        self.box.setChecked(default_on())
        self.box.toggled.connect(self._toggled)
        self.scheduler.enabled = self.box.isChecked()
        self.line = QLabel("")
        self.line.setObjectName("encodeAheadStatus")
        self.line.setWordWrap(False)  # one line: its height never changes
        # its text never widens the dock (a wider dock is a narrower, redrawn canvas)
        self.line.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.line.setMinimumWidth(0)
        self.line.setVisible(False)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.box)
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self.refresh)
        self._poll.start()

    @property
    def on(self) -> bool:
        """Whether the switch is on."""
        return self.box.isChecked()

    def follow(self, ref: SliceRef, image: Image) -> None:
        """The user is on ``ref`` of ``image``: plan the planes to encode (no-op when off)."""
        encoder = self.sync()
        if encoder is None or not self.on:
            return
        if self._tiled(ref):
            return
        self._image = image
        self.scheduler.follow(ref, plane_shape(image))

    def follow_series(self, hook: SeriesHook | None) -> None:
        """Encode the next images ``hook`` offers after the planes ahead (None: no series).

        A pending image whose plane turns out tiled is not encoded.
        """
        if hook is None:
            self.scheduler.series = None
            return

        def untiled(resolve):
            def checked() -> SliceRef | None:
                ref = resolve()
                return None if ref is None or self._tiled(ref) else ref
            return checked

        self.scheduler.series = lambda count: [
            Pending(p.name, untiled(p.resolve)) if isinstance(p, Pending) else p
            for p in hook(count)]

    def _tiled(self, ref: SliceRef) -> bool:
        """Whether ``ref``'s prompts are answered on tiles (so it is not encoded ahead)."""
        encoder, tiling = self.workspace.encoder, self.workspace.tiling
        return (encoder is not None and ref.region is None and tiling is not None
                and tiling.applies(ref.plane_shape, input_side(encoder.adapter)))

    def _label(self, ref: SliceRef) -> str:
        """``"z=13"``, ``"this image"``, or ``"the next image (b.tif)"`` (any thread)."""
        if ref.index:
            return f"z={ref.index[-1]}"
        image = self._image
        if image is not None and image_source(image) == ref.source:
            return "this image"
        if isinstance(ref.source, SeriesSource):
            return f"the next image ({ref.source.name})"
        return "the next image"

    def sync(self) -> SliceEncoder | None:
        """Work through the workspace's encoder now (a model loaded or unloaded drops the plan)."""
        encoder = self.workspace.encoder
        if encoder is not self._attached:
            self.scheduler.attach(encoder)
            self._attached = encoder
        return encoder

    def refresh(self) -> None:
        """Copy the scheduler's state into the status line (the poll timer's slot)."""
        state = self.scheduler.state
        text = IDLE_TEXT if self.on else ""
        if state.text:
            text = f"Encode ahead: {state.text}"
            image = self._image
            if state.ref is not None and image is not None and state.ref.index:
                text = text.replace(f"z={state.ref.index[-1]}", index_label(image, state.ref.index))
        if self.line.text() != text:
            self.line.setText(text)
            self.line.setToolTip(text)  # in full, where the dock is narrower than the text
        if self.line.isHidden() == bool(text):
            self.line.setVisible(bool(text))  # only when switched on or off

    def close_scheduler(self) -> None:
        """Stop the background work and its thread (the dock is going away)."""
        try:
            self._poll.stop()
        except RuntimeError:  # Qt already deleted the timer
            pass
        self.scheduler.close()

    def _toggled(self, on: bool) -> None:
        self.scheduler.enabled = bool(on)
        self.refresh()
