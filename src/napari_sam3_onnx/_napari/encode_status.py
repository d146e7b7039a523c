"""The dock's encoding indicator: a bar, the seconds so far, napari's activity panel, Cancel.

A SAM 3 encode is one onnxruntime call of 16-20 s on a CPU, with no progress of its own to
report. The bar is therefore an estimate from the previous encode's duration (indeterminate
before the first one), the status line counts the seconds, and napari's activity panel lists
the encode like every other long job of the plugin.

Cancel stops *waiting*: the preview the encode was for is dropped at once and the dock is
free again. The user's own encode runs to its end in its worker thread and its embedding is
kept in the cache, so prompting that plane later costs nothing. (Background encodes - encode
ahead, :mod:`napari_sam3_onnx.engine.encode_ahead` - are the ones stopped mid-run, through
``RunOptions.terminate``: they give way to the user's.)
"""

from __future__ import annotations

import time
from collections.abc import Callable

from napari.utils import progress as napari_progress
from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QWidget

#: How often the seconds and the estimated bar are updated.
TICK_MS = 250
#: The estimated bar stops here until the encode really ends.
CAP = 0.95


class EncodeStatus(QWidget):
    """Bar + Cancel for the encode in progress.

    Parameters
    ----------
    on_cancel : callable
        Called when the user presses Cancel.
    show : callable
        ``show(text)`` puts a line in the dock's status line.
    """

    def __init__(self, on_cancel: Callable[[], None], show: Callable[[str], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._show = show
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.cancel = QPushButton("Cancel")
        self.cancel.setToolTip("Stop waiting for this plane; its preview is dropped.")
        self.cancel.clicked.connect(on_cancel)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.bar, 1)
        row.addWidget(self.cancel)
        self.setVisible(False)
        self.last_seconds: float | None = None  # the previous encode's duration
        self._since = 0.0
        self._text = ""
        self._activity = None
        self._tick = QTimer(self)
        self._tick.setInterval(TICK_MS)
        self._tick.timeout.connect(self._update)

    @property
    def elapsed(self) -> float:
        """Seconds since the encode began."""
        return time.monotonic() - self._since

    def start(self, text: str) -> None:
        """An encode began (``text`` says which plane)."""
        self._since, self._text = time.monotonic(), text
        if self.last_seconds:
            self.bar.setRange(0, 1000)
            self.bar.setValue(0)
        else:
            self.bar.setRange(0, 0)  # no estimate yet: indeterminate
        self.setVisible(True)
        if self._activity is None:
            self._activity = napari_progress(desc=text.rstrip("."))
        self._tick.start()
        self._show(text)

    def stop(self, completed: bool) -> None:
        """The encode ended (``completed``) or the user stopped waiting for it."""
        if completed and not self.isHidden():
            self.last_seconds = self.elapsed
        try:
            self._tick.stop()
        except RuntimeError:  # Qt already deleted it (interpreter exit)
            pass
        self.setVisible(False)
        if self._activity is not None:
            self._activity.close()
            self._activity = None

    def _update(self) -> None:
        elapsed = self.elapsed
        if self.last_seconds:
            self.bar.setValue(int(1000 * min(elapsed / self.last_seconds, CAP)))
            estimate = f" of ~{self.last_seconds:.0f} s"
        else:
            estimate = ""
        self._show(f"{self._text} {elapsed:.0f} s{estimate}")
