"""Checking an embedding store against the loaded model, off the Qt thread.

Attaching a store hashes the bundle's weight files (about 8 s for a full-size SAM 3 bundle the
first time; :mod:`~napari_sam3_onnx.engine.store.bundle_digest` then remembers the hashes) and
opens the store. :meth:`Workspace.prepare <napari_sam3_onnx.api.workspace.Workspace.prepare>`
does that in a worker (:func:`~napari_sam3_onnx._napari.workers.start`), and its result is
attached with :meth:`~napari_sam3_onnx.api.workspace.Workspace.use` on the Qt thread. While a
check runs the workspace has no encoder (:meth:`~napari_sam3_onnx.api.workspace.Workspace.pause`),
so no tab encodes beside the store the user chose.

Every check carries a generation. A newer choice (another store, memory only, another model or
device) supersedes the running check: its result, or its failure, is dropped when it arrives,
so the last choice wins. A superseded check is not interrupted (a file being hashed is read to
its end; its hash is remembered for the next check), it only no longer counts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from napari_sam3_onnx._napari import workers
from napari_sam3_onnx.api.workspace import Attachment, Workspace
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.models.base import SamAdapter
from napari_sam3_onnx.models.errors import Sam3OnnxError


def checking_text(store: Path) -> str:
    """What the dock says while ``store`` is checked."""
    return (f"Checking the embedding store {store.name} against the model... "
            "(the tabs wait until it is attached)")


def refusal_text(exc: BaseException) -> str:
    """Why a store was not used: our errors in their own words, others with their type."""
    why = str(exc) if isinstance(exc, Sam3OnnxError) else f"{type(exc).__name__}: {exc}"
    return f"Embedding store not used: {why}"


class StoreCheck:
    """At most one store check that counts: the one for the user's last choice.

    Parameters
    ----------
    workspace : Workspace
        The dock's workspace; paused while a check runs, then given the checked encoder.
    on_attached : callable
        ``on_attached(attachment)`` on the Qt thread once the store is attached.
    on_refused : callable
        ``on_refused(message)`` on the Qt thread when the store cannot be used; the model is
        then attached from memory only.

    Attributes
    ----------
    store : Path or None
        The store being checked (None: no check runs).
    """

    def __init__(self, workspace: Workspace, on_attached: Callable[[Attachment], None],
                 on_refused: Callable[[str], None]) -> None:
        self._workspace = workspace
        self._on_attached, self._on_refused = on_attached, on_refused
        self._generation = 0
        self.store: Path | None = None

    def supersede(self, _obj=None) -> None:
        """Drop the running check's result, whenever it comes (a newer choice was made)."""
        self._generation += 1
        self.store = None

    def start(self, adapter: SamAdapter, folder: Path, store: Path, write: bool,
              image_name: Callable[[SliceRef], str] | None = None) -> None:
        """Pause the workspace and check ``store`` for ``adapter`` in a worker."""
        self.supersede()
        generation = self._generation
        self.store = store
        self._workspace.pause()
        workers.start(self._workspace.prepare, adapter, folder, store, write, image_name,
                      on_result=lambda attachment: self._done(generation, attachment),
                      on_error=lambda exc: self._failed(generation, adapter, folder, exc))

    def _current(self, generation: int) -> bool:
        if generation != self._generation:
            return False  # a newer choice superseded this check
        self.store = None
        return True

    def _done(self, generation: int, attachment: object) -> None:
        if self._current(generation):
            ready = cast(Attachment, attachment)
            self._workspace.use(ready)
            self._on_attached(ready)

    def _failed(self, generation: int, adapter: SamAdapter, folder: Path,
                exc: BaseException) -> None:
        if self._current(generation):
            self._workspace.attach(adapter, folder)  # memory only, as without a store
            self._on_refused(refusal_text(exc))
