"""The widget's model section: bundle folder, Download..., device and cache budget.

Opening a bundle only reads the graphs' headers; the weights load in a worker on the first
encode, and an embedding store is checked against the bundle in a worker too
(:mod:`.store_check`: hashing a full bundle's weights takes seconds). The registry and
downloader are imported lazily: without them the Download menu is disabled and the folder
field still works.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from qtpy.QtCore import QObject, Signal
from qtpy.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QToolButton,
    QWidget,
)

from napari_sam3_onnx._napari import workers
from napari_sam3_onnx._napari.model.bundle_words import BundleWords, bundle_words
from napari_sam3_onnx._napari.model.download_menu import download_menu
from napari_sam3_onnx._napari.model.opener import Opened, Tickets, device_choices, open_checked
from napari_sam3_onnx._napari.model.reach import check_reachable
from napari_sam3_onnx._napari.model.store_check import StoreCheck, checking_text
from napari_sam3_onnx._napari.model.store_row import StoreRow
from napari_sam3_onnx.api.workspace import Attachment, Workspace
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.models.base import Capability, SamAdapter
from napari_sam3_onnx.models.errors import Sam3OnnxError
from napari_sam3_onnx.models.runtime import RuntimeConfig


class _Relay(QObject):
    """Carries download progress from the worker thread to the Qt thread."""

    progress = Signal(str, int, object)


class ModelPanel(QWidget):
    """Folder, download, device and cache controls; attaches each model to the workspace.

    Parameters
    ----------
    on_model : callable
        ``on_model()`` after every load attempt and store change (the workspace then holds
        the new model and encoder, or none).
    cache_budget : callable
        ``cache_budget(bytes)`` when the budget changes.
    notify : callable
        ``notify(message)`` for errors and hints.
    image_name : callable, optional
        ``ref -> str``: an image's name to look for in an attached embedding store (a
        layer's name; entries are found by content all the same).
    workspace : Workspace, optional
        The dock's one workspace, which every tab uses (default: a new one).
    inform : callable, optional
        ``inform(message)`` for routine news (a store being checked, then attached).
    """

    #: Emitted after every load attempt and when a store check starts or ends (the workflow
    #: tabs re-read ``adapter`` and :attr:`checking`).
    loaded = Signal()

    def __init__(self, on_model: Callable[[], None], cache_budget: Callable[[int], None],
                 notify: Callable[[str], None], parent: QWidget | None = None,
                 image_name: Callable | None = None, workspace: Workspace | None = None,
                 inform: Callable[[str], None] | None = None) -> None:
        super().__init__(parent)
        self._on_model, self._budget_cb, self._notify = on_model, cache_budget, notify
        self._inform = inform if inform is not None else (lambda _message: None)
        self._image_name = image_name
        self.workspace = workspace if workspace is not None else Workspace()
        self.check = StoreCheck(self.workspace, self._store_attached, self._store_refused)
        self.destroyed.connect(self.check.supersede)  # a check ending after the dock: dropped
        self._line = ""  # the model line the info label shows
        self.toy = False
        self._loaded: tuple[Path, str] | None = None  # (folder, name the field shows)
        self.loads = Tickets()  # the latest background load counts, until the dock closes
        self.destroyed.connect(self.loads.drop)
        self._cancel = False
        self._relay = _Relay(self)
        self._relay.progress.connect(self._show_progress)

        self.folder = QLineEdit()
        self.folder.setPlaceholderText("Folder with the bundle's .onnx files")
        self.folder.editingFinished.connect(self.load_in_background)
        browse = QPushButton("Browse...")
        browse.clicked.connect(self._browse)
        self.download = QToolButton()
        self.download.setText("Download...")
        self.download.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.download.setMenu(self._download_menu())
        self.cancel = QPushButton("Cancel download")
        self.cancel.setVisible(False)
        self.cancel.clicked.connect(lambda: setattr(self, "_cancel", True))
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for w in (self.folder, browse, self.download):
            row.addWidget(w)
        self.device = QComboBox()
        self.device.addItems(device_choices())
        self.device.currentTextChanged.connect(lambda _t: self.load())
        self.budget = QSpinBox()
        self.budget.setRange(64, 1 << 18)
        self.budget.setSingleStep(256)
        self.budget.setSuffix(" MB")
        self.budget.setValue(1024)
        self.budget.valueChanged.connect(lambda mb: self._budget_cb(int(mb) << 20))
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.info = QLabel("No model loaded.")
        self.info.setWordWrap(True)
        self.store = StoreRow()
        self.store.changed.connect(self._hand_on)

        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Model", row)
        form.addRow("Device", self.device)
        form.addRow("Cache", self.budget)
        form.addRow("Embeddings", self.store)
        self._settings_rows = form.rowCount()  # where add_setting puts further dock settings
        form.addRow(self.progress)
        form.addRow(self.cancel)
        form.addRow(self.info)

    def add_setting(self, label: str, widget: QWidget) -> None:
        """Another dock-wide setting row (``label``, ``widget``) below the Embeddings row."""
        cast(QFormLayout, self.layout()).insertRow(self._settings_rows, label, widget)
        self._settings_rows += 1

    @property
    def bundle_folder(self) -> Path | None:
        """Folder of the loaded bundle (the field shows its name), None when none is loaded."""
        return self._loaded[0] if self._loaded is not None else None

    @property
    def adapter(self) -> SamAdapter | None:
        """The loaded model (the workspace's), None when none is loaded."""
        return self.workspace.adapter

    def text_cache(self) -> TextCache | None:
        """The workspace's one language cache (every tab's), built on first use.

        None without a model or a language encoder.

        Raises
        ------
        Sam3OnnxError
            The bundle folder has no tokenizer file.
        """
        return self.workspace.texts if self.workspace.has(Capability.TEXT) else None

    @property
    def checking(self) -> str | None:
        """Why nothing can encode now: a store is being checked (None: nothing to wait for)."""
        return None if self.check.store is None else checking_text(self.check.store)

    # ---- loading ---------------------------------------------------------------------
    def load(self, folder: str | Path | None = None, toy: bool = False) -> SamAdapter | None:
        """Open the bundle in ``folder`` (default: the field's text) on the chosen device, now.

        The field then shows the bundle's name, with the full path in its tooltip; while it
        still shows that name, reloading (a new device) reopens the same folder. The user's
        own picks go through :meth:`load_in_background`, which does the same in a worker.
        """
        target = self._target(folder, toy)
        if target is None:
            return None
        self.loads.new()  # a background load still in flight no longer counts
        try:
            opened = open_checked(*target)
        except Sam3OnnxError as exc:
            self._failed(target[0], exc)
            return None
        return self._opened(target[0], opened)

    def load_in_background(self, folder: str | Path | None = None, toy: bool = False) -> None:
        """:meth:`load` with the headers, tokenizer and :func:`bundle_words` in a worker.

        A later load wins; the Qt thread only attaches the model and sets the texts.
        """
        target = self._target(folder, toy)
        if target is None:
            return
        ticket, path = self.loads.new(), target[0]
        device, toy_now = self.device.currentText(), self.toy
        self.info.setText(f"Opening {path}...")

        def work(folder: Path, config: RuntimeConfig) -> tuple[Opened, BundleWords]:
            opened = open_checked(folder, config)
            return opened, bundle_words(folder, opened.adapter, device, toy_now)

        def done(result) -> None:
            if self.loads.counts(ticket):
                opened, words = cast(tuple[Opened, BundleWords], result)
                self._opened(path, opened, words)

        def failed(exc: BaseException) -> None:
            if self.loads.counts(ticket):
                self._failed(path, exc if isinstance(exc, Sam3OnnxError)
                             else Sam3OnnxError(workers.describe(exc)))

        workers.start(work, *target, on_result=done, on_error=failed)

    def _target(self, folder: str | Path | None, toy: bool) -> tuple[Path, RuntimeConfig] | None:
        """The folder to open (the field's, or ``folder``) and the device's configuration."""
        if folder is not None:
            self.folder.setText(str(folder))
            self.toy = toy
        text = self.folder.text().strip()
        if not text:
            return None
        if self._loaded is not None and text == self._loaded[1]:
            path = self._loaded[0]  # the same bundle again (e.g. on another device)
        else:
            if folder is None:  # a path typed into the field
                self.toy = False
            path = Path(text).expanduser()
        return path, RuntimeConfig(providers=self.device.currentText())

    def _failed(self, folder: Path, exc: Sam3OnnxError) -> None:
        self.check.supersede()
        self.workspace.detach()
        self.toy, self._loaded = False, None
        self.folder.setToolTip(str(folder))
        self.info.setText(f"<b>Not loaded.</b> {exc}")
        self._notify(str(exc))
        self._on_model()
        self.loaded.emit()

    def _opened(self, folder: Path, opened: Opened | None,
                words: BundleWords | None = None) -> SamAdapter:
        """Show the model ``opened`` from ``folder`` (None: the workspace's, already attached).

        ``words``: what to show, from the load's worker (None: worked out here).
        """
        if opened is not None:
            self.workspace.attach(opened.adapter, folder)
            if opened.texts is not None:
                self.workspace.adopt_texts(opened.texts)
        adapter = cast(SamAdapter, self.workspace.adapter)
        if words is None:
            words = bundle_words(folder, adapter, self.device.currentText(), self.toy)
        self._loaded = (folder, words.name)
        self.folder.setText(words.name)
        self.folder.setToolTip(words.where)
        self._line = words.line
        (self._hand_on if opened is not None else self._changed)()
        return adapter

    def show_kept(self, toy: bool) -> None:
        """Show the workspace's model, kept from a closed dock of this viewer: not opened again."""
        self.toy = toy
        self._opened(cast(Path, self.workspace.folder), None)

    def _hand_on(self) -> None:
        """Attach the model to the workspace with the chosen store (the encoder every tab uses).

        Memory only attaches at once. A store is checked in a worker (:class:`StoreCheck`)
        while the tabs wait; a store of another bundle or precision is then refused with the
        store's own message and the model works from memory only.
        """
        adapter = self.adapter
        if adapter is None or self._loaded is None:
            return
        folder, store = self._loaded[0], self.store.path
        if store is None:
            self.check.supersede()
            self.workspace.attach(adapter, folder)
        else:
            self.check.start(adapter, folder, store, self.store.write.isChecked(),
                             self._image_name)
            self._inform(checking_text(store))
        self._changed()

    def _changed(self) -> None:
        checking = self.checking
        self.info.setText(self._line + (f"<br><i>{checking}</i>" if checking else ""))
        self._on_model()
        self.loaded.emit()

    def _store_attached(self, attachment: Attachment) -> None:
        if attachment.store is not None:
            self._inform(f"Embedding store {attachment.store.name} attached.")
        self._changed()

    def _store_refused(self, message: str) -> None:
        self.store.detach()
        self._notify(message)
        self._changed()

    def load_toy(self) -> None:
        """Load the registry's toy model, building it first if it is not cached yet (~1 s)."""
        try:
            from napari_sam3_onnx.api.bundle_fetch import build_here
            from napari_sam3_onnx.models.registry import get_bundle

            folder = build_here(get_bundle("toy"))
        except ImportError as exc:
            self._notify(f"The toy model is not available in this version ({exc}).")
            return
        except Sam3OnnxError as exc:
            self.info.setText(f"<b>Not loaded.</b> {exc}")
            self._notify(str(exc))
            return
        self.load(folder, toy=True)

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder with a SAM 3 ONNX bundle")
        if path:
            self.load_in_background(path)

    # ---- downloads -------------------------------------------------------------------
    def _download_menu(self) -> QMenu:
        return download_menu(self, self.load_toy, self.start_download)

    def start_download(self, spec, token: str | None = None) -> None:
        """Download ``spec`` in a worker (progress bar, cancel button), then load it."""
        try:
            from napari_sam3_onnx.models.download import download_bundle
            from napari_sam3_onnx.models.registry import bundle_dir
        except ImportError as exc:
            self._notify(f"Downloads are not available in this version ({exc}).")
            return
        from napari_sam3_onnx.models.hub_fetch import (
            effective_token,  # $HF_TOKEN or 'hf auth login'
        )

        if getattr(spec, "gated", False) and token is None and effective_token(None) is None:
            token, ok = QInputDialog.getText(self, "Access token", f"{spec.title} is gated on "
                                             "Hugging Face. Paste your access token:")
            if not ok or not token:
                return
        self._cancel = False
        self.progress.setVisible(True)
        self.cancel.setVisible(True)
        self.download.setEnabled(False)

        def report(name: str, done: int, total: int | None) -> None:
            if self._cancel:
                raise Sam3OnnxError("Download cancelled; the file being fetched was not kept.")
            self._relay.progress.emit(name, int(done), total)

        def finished() -> None:
            self.progress.setVisible(False)
            self.cancel.setVisible(False)
            self.download.setEnabled(True)

        def fetch():  # in the worker: an unreachable server fails at once, not after ~25 s
            check_reachable(spec, bundle_dir(spec.id))
            return download_bundle(spec, None, report, token)

        def failed(exc: BaseException) -> None:  # the notification's first line says it all
            said = workers.describe(exc)
            self._notify(said if said.startswith("No connection") else
                         f"Download of {spec.title} failed: {said}")

        workers.start(fetch, on_result=lambda folder: self._loaded_download(cast(Path, folder)),
                      on_error=failed, on_finish=finished)

    def _loaded_download(self, folder: Path) -> None:
        self.load_in_background(folder)

    def _show_progress(self, name: str, done: int, total: object) -> None:
        if isinstance(total, int) and total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * done / total))
            self.progress.setFormat(f"{name}: {done >> 20} / {total >> 20} MB")
        else:
            self.progress.setRange(0, 0)
