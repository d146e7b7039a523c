"""One generator workflow run for a tab: worker, paced results, Cancel within one slice, progress.

The Text, Automatic and Propagate tabs run an API generator (one step per slice:
:func:`~napari_sam3_onnx.api.search.iter_search`, the automatic loops,
:func:`~napari_sam3_onnx.api.propagate.iter_propagate`) in napari's thread pool.
:class:`GeneratorRun` is that wiring, once:

* **the worker stays at most one step ahead of the Qt thread** (:class:`Gate`): after yielding
  a step it waits until the Qt thread has taken it. A Cancel click queued before that step's
  delivery is therefore handled before the next step starts, whatever the Qt thread was busy
  with, and the workflow's cancel token (checked before each slice) stops the run: at most the
  slice in progress finishes after the click. Waiting releases the interpreter, so the worker
  does not compete with the Qt thread's painting for the GIL either.
* **results reach the tab at a bounded rate** (:class:`~.pacing.Pacer`: one batch per
  :data:`~.pacing.INTERVAL_MS`), and the tab redraws a layer only when a written plane is the
  one the viewer shows (:func:`plane_shown`);
* **progress** goes to the tab's bar (and the status line) at most every
  :data:`~.pacing.NEWS_EVERY_S` (:meth:`GeneratorRun.news_due`: each update repaints the
  window, composed whole with its OpenGL canvas), without a synchronous repaint (:func:`set_bar`;
  ``QProgressBar.setValue`` repaints the whole window at once, the canvas included). napari's
  activity panel does not list the run: building its bar took 50-150 ms of the Qt thread
  (measured with ``benchmarks/stall_sampler.py``), and every value given to it turns the event
  loop (``QApplication.processEvents``) there and then;
* **errors** go to the dock's status line (``notify``) as :func:`~.workers.describe` words them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Generator, Iterator
from typing import Any

from napari.qt.threading import create_worker
from qtpy.QtCore import QObject
from qtpy.QtWidgets import QProgressBar

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.pacing import INTERVAL_MS, NEWS_EVERY_S, Every, Pacer
from napari_sam3_onnx._napari.workers import describe
from napari_sam3_onnx.models.errors import Sam3OnnxError

log = logging.getLogger(__name__)

#: How often a worker waiting for the Qt thread looks at the cancel token (s).
POLL_S = 0.05


class Gate:
    """A run's cancel token and the hand-over that keeps its worker one step ahead at most.

    Plain Python (no Qt object), so a tab's teardown can stop the run after the tab is gone.
    """

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._taken = threading.Event()
        self._taken.set()

    def cancelled(self) -> bool:
        """The workflow's cancel token."""
        return self._cancel.is_set()

    def stop(self) -> None:
        """Cancel: the workflow stops before its next slice; a waiting worker goes on at once."""
        self._cancel.set()
        self._taken.set()

    def reset(self) -> None:
        """Ready for a new run."""
        self._cancel.clear()
        self._taken.set()

    def take(self) -> None:
        """The Qt thread has the last step yielded (the worker may compute the next)."""
        self._taken.set()

    def steps(self, steps: Iterator) -> Generator[Any, None, Any]:
        """``steps`` re-yielded, each only once the Qt thread took the one before (worker side).

        Returns the workflow generator's own return value.
        """
        while True:
            try:
                step = next(steps)
            except StopIteration as end:
                return end.value
            self._taken.clear()
            yield step
            while not self._taken.wait(POLL_S):
                if self._cancel.is_set():
                    break


def set_bar(bar: QProgressBar, value: int, text: str | None = None) -> None:
    """Show ``value`` (and the format ``text``) on ``bar`` at the next paint, not at once.

    ``QProgressBar.setValue`` repaints synchronously, and a repaint inside a napari window
    redraws the whole window there and then; with updates off it only records the value, and
    turning them on again schedules an ordinary paint.
    """
    bar.setUpdatesEnabled(False)
    try:
        if text is not None:
            bar.setFormat(text)
        bar.setValue(int(value))
    finally:
        bar.setUpdatesEnabled(True)


def plane_shown(viewer, image, indices: Collection[tuple[int, ...]]) -> bool:
    """Whether any plane ``indices`` of ``image`` is on screen (a redraw would show a change).

    True when the view is not the 2-D view of the image's last two axes (3-D, transposed):
    then every plane may be visible.
    """
    if not indices:
        return False
    try:
        current = layers.current_index(viewer, image)
    except Sam3OnnxError:
        return True
    return any(tuple(int(i) for i in index) == current for index in indices)


class GeneratorRun(QObject):
    """Runs one generator workflow at a time for a tab (see the module docstring).

    Parameters
    ----------
    apply : callable
        ``apply(steps)`` on the Qt thread with the steps that arrived since the last batch, in
        order (every step is delivered, once; the last batch comes before ``on_done``).
    progress : QProgressBar, optional
        The tab's bar: shown while the run is out, its range the run's ``total``.
    notify : callable, optional
        ``notify(message)``: errors are said there (None: ``on_done`` reports them).
    parent : QObject, optional
        The tab.

    Attributes
    ----------
    gate : Gate
        The cancel token and hand-over (``gate.stop`` is safe in a teardown).
    pacer : Pacer
        The batches (``batches`` counts them).
    result, error
        What the last run returned, or raised (None until it ends).
    """

    def __init__(self, apply: Callable[[list], None], *, progress: QProgressBar | None = None,
                 notify: Callable[[str], None] | None = None, parent: QObject | None = None,
                 interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.gate = Gate()
        self.pacer = Pacer(apply, interval_ms, parent=self)
        self.progress = progress
        self._notify = notify
        self.worker: Any = None
        self.result: Any = None
        self.error: BaseException | None = None
        self._on_done: Callable[[GeneratorRun], None] | None = None
        self._news = Every(NEWS_EVERY_S)
        self._ending = False  # the run's last batch is being applied
        gate = self.gate
        self.destroyed.connect(lambda *_: gate.stop())  # a closed dock: a waiting worker ends

    @property
    def running(self) -> bool:
        """A run is out (until its last batch is applied and ``on_done`` has run)."""
        return self.worker is not None

    @property
    def cancelled(self) -> bool:
        """Cancel was asked for during the last run."""
        return self.gate.cancelled()

    def start(self, func: Callable[..., Iterator], *args, total: int,
              on_done: Callable[[GeneratorRun], None], **kwargs) -> None:
        """Run ``func(*args, cancelled=token, **kwargs)`` (a generator function) in a worker.

        ``total`` is the progress bar's range; ``on_done`` gets this object once the run has
        ended (done, cancelled or failed) and its last batch is applied.
        """
        if self.running:
            raise RuntimeError("a run is already in progress")
        self.gate.reset()
        self._news, self._ending = Every(NEWS_EVERY_S), False
        self.result, self.error, self._on_done = None, None, on_done
        if self.progress is not None:
            self.progress.setRange(0, max(int(total), 0))
            set_bar(self.progress, 0)
            self.progress.setVisible(True)
        gate = self.gate

        def work():  # the worker's generator: the workflow, one step ahead at most
            return (yield from gate.steps(func(*args, cancelled=gate.cancelled, **kwargs)))

        self.worker = create_worker(
            work, _connect={"yielded": self._yielded, "returned": self._returned,
                            "errored": self._errored, "finished": self._finished},
            _ignore_errors=True, _start_thread=True)

    def cancel(self) -> None:
        """Stop before the next slice; the slice in progress finishes, what is done is kept."""
        self.gate.stop()

    def news_due(self) -> bool:
        """Whether a batch should update the bar and status line.

        At most once every :data:`~.pacing.NEWS_EVERY_S`; the first batch of a run always
        does, and so does the last chunk of its last batch (the run's final count).
        """
        return (self._ending and not self.pacer.pending) or self._news.due()

    def set_progress(self, done: int, text: str | None = None) -> None:
        """Show ``done`` steps (and the bar's format ``text``) at the next paint."""
        if self.progress is not None:
            set_bar(self.progress, done, text)

    # ---- Qt thread ---------------------------------------------------------------------
    def _yielded(self, step) -> None:
        self.gate.take()
        self.pacer.push(step)

    def _returned(self, value) -> None:
        self.result = value

    def _errored(self, exc: BaseException) -> None:
        log.debug("generator run failed", exc_info=exc)
        self.error = exc
        if self._notify is not None:
            self._notify(describe(exc))

    def _finished(self) -> None:
        self._ending = True  # the last batch, maybe in several chunks: its last says the news
        self.pacer.flush(then=self._end)

    def _end(self) -> None:
        """Every step applied: the run is over."""
        self._ending = False
        if self.progress is not None:
            self.progress.setVisible(False)
        self.worker = None
        done, self._on_done = self._on_done, None
        if done is not None:
            done(self)
