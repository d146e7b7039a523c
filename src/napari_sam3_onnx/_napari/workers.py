"""Model work off the Qt thread: :func:`start` runs a workflow function in napari's pool.

The work itself is Qt-free (:mod:`napari_sam3_onnx.api.clicks` for clicks and boxes, the
search, propagation and automatic generators for the other tabs); :func:`start` delivers its
result or error on the Qt thread. Every click job carries the generation it was started for;
the caller drops results whose generation is no longer current.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from napari.qt.threading import create_worker

from napari_sam3_onnx.models.errors import Sam3OnnxError

log = logging.getLogger(__name__)


def describe(exc: BaseException) -> str:
    """A message for people: our errors speak for themselves, others get their type named."""
    if isinstance(exc, Sam3OnnxError):
        return str(exc)
    return f"The model run failed ({type(exc).__name__}: {exc})."


def start(
    func: Callable,
    *args,
    on_result: Callable[[object], None],
    on_error: Callable[[BaseException], None],
    on_finish: Callable[[], None] | None = None,
):
    """Run ``func(*args)`` in napari's thread pool; callbacks arrive on the Qt thread.

    Returns
    -------
    napari.qt.threading.FunctionWorker
        The started worker.
    """

    def _error(exc: BaseException) -> None:
        log.debug("worker failed", exc_info=exc)
        on_error(exc)

    connect: dict = {"returned": on_result, "errored": _error}
    if on_finish is not None:
        connect["finished"] = on_finish
    return create_worker(func, *args, _connect=connect, _ignore_errors=True, _start_thread=True)
