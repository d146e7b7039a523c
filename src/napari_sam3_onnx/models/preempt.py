"""Graph runs another thread can stop: a :class:`CancelToken` and the :class:`Preempted` outcome.

A background encode (the dock's encode ahead) must give way at once when the user asks for a
plane of their own. Both runtimes can stop a run in flight from another thread:

* onnxruntime: every run under a token gets its own ``onnxruntime.RunOptions``; cancelling sets
  its ``terminate`` flag, which the executor reads between operators, and the run raises
  (``Fail: Exiting due to terminate flag being set to true``);
* OpenVINO: ``InferRequest.cancel()`` stops the request's synchronous ``infer`` (it raises
  ``RuntimeError: Infer Request was canceled``); the request can be used again afterwards.

Either failure becomes :class:`Preempted` for the caller, so a stopped run is never mistaken for
a broken model and never yields outputs: a stopped encode leaves no embedding behind.

A token reaches the sessions without passing through the adapters: :func:`preemptible` makes it
the calling thread's token, and :class:`~.runtime.LazySession` runs every graph that thread runs
under it. Other threads' runs are untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from .errors import Sam3OnnxError

T = TypeVar("T")

_local = threading.local()


class Preempted(Sam3OnnxError):
    """A graph run was stopped through its :class:`CancelToken`; it produced nothing."""

    def __init__(self, what: str = "") -> None:
        where = f" ({what})" if what else ""
        super().__init__(f"The run was stopped to make way for another{where}; nothing was kept.")


class CancelToken:
    """A handle that stops, from any thread, the graph runs made under it.

    Cancelling is final for the token: a run started under a cancelled token raises
    :class:`Preempted` at once. Make a new token for the next piece of work.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._stops: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop the runs in flight under this token and refuse new ones (any thread, idempotent)."""
        with self._lock:
            self._cancelled = True
            stops = list(self._stops)
        for stop in stops:
            stop()

    def check(self, what: str = "") -> None:
        """Raise :class:`Preempted` if the token is cancelled."""
        if self._cancelled:
            raise Preempted(what)

    def run(self, call: Callable[[], T], stop: Callable[[], None], what: str = "") -> T:
        """``call()``, stopped by ``stop()`` if the token is cancelled meanwhile.

        Parameters
        ----------
        call : callable
            The run (one graph's ``session.run``).
        stop : callable
            Stops that very run from another thread (sets its ``terminate``, cancels its
            request).
        what : str
            Names the run in the :class:`Preempted` message.

        Raises
        ------
        Preempted
            The token was cancelled before or during the run (the run's own error, if any, is
            its cause).
        """
        with self._lock:
            if self._cancelled:
                raise Preempted(what)
            self._stops.append(stop)
        try:
            return call()
        except Exception as exc:
            if self._cancelled:
                raise Preempted(what) from exc
            raise
        finally:
            with self._lock:
                self._stops.remove(stop)


def current_token() -> CancelToken | None:
    """The calling thread's token (:func:`preemptible`), or None."""
    return getattr(_local, "token", None)


@contextmanager
def preemptible(token: CancelToken | None) -> Iterator[CancelToken | None]:
    """Run every graph the calling thread runs inside the block under ``token``.

    ``None`` leaves the thread's runs as they are (unstoppable). Blocks nest; the outer token
    comes back on exit.
    """
    previous = current_token()
    _local.token = token
    try:
        yield token
    finally:
        _local.token = previous
