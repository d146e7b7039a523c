"""The widget's model section: bundle folder, Download..., device and cache budget.

Opening a bundle only reads the graphs' headers; the weights load in a worker on the first
encode. The registry and downloader are imported lazily: without them the Download menu is
disabled and the folder field still works.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

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

from ..engine.concepts import TextCache
from ..engine.encoding import SliceEncoder
from ..engine.tokenizer import ClipTokenizer
from ..models.base import Capability, SamAdapter
from ..models.bundle import open_bundle
from ..models.errors import Sam3OnnxError
from ..models.runtime import PROVIDER_ALIASES, RuntimeConfig, available_providers
from . import workers

TOY_NOTE = ("TOY TEST MODEL: a tiny hand-written graph that outlines bright blobs. It is not "
            "SAM 3; load real SAM 3 weights for real work.")


class _Relay(QObject):
    """Carries download progress from the worker thread to the Qt thread."""

    progress = Signal(str, int, object)


def device_choices() -> list[str]:
    """``"auto"`` plus the short names of the providers this onnxruntime offers."""
    short = {full: alias for alias, full in reversed(list(PROVIDER_ALIASES.items()))}
    return ["auto", *[short.get(p, p) for p in available_providers()]]


def build_toy_bundle(folder: Path | None = None) -> Path:
    """Write the small test bundle (needs the ``onnx`` package) and return its folder."""
    try:
        from ..testing.hf_tracker import build_hf_tracker
    except ImportError as exc:
        raise Sam3OnnxError(f"The toy model needs the 'onnx' package ({exc}): "
                            "pip install 'napari-sam3-onnx[toy]'.") from exc
    folder = folder or Path(tempfile.mkdtemp(prefix="sam3-onnx-toy-"))
    return build_hf_tracker(folder)


def _detector_texts(adapter: SamAdapter, folder: Path) -> TextCache:
    """Boxes through the concept detector (``"visual"``) and text search need the tokenizer."""
    if not adapter.has(Capability.TEXT):
        caps = ", ".join(sorted(c.value for c in adapter.capabilities))
        raise Sam3OnnxError(f"The {adapter.layout} bundle cannot answer clicks, boxes or text "
                            f"(it can: {caps}). Choose a bundle with a SAM head or a detector.")
    return TextCache(adapter, ClipTokenizer.from_folder(folder))


class ModelPanel(QWidget):
    """Folder, download, device and cache controls; calls ``on_encoder`` with each new model.

    Parameters
    ----------
    on_encoder : callable
        ``on_encoder(encoder_or_None, texts_or_None)`` after every load attempt; ``texts`` is
        the language cache a detector-only bundle needs for boxes (None with a SAM head).
    cache_budget : callable
        ``cache_budget(bytes)`` when the budget changes.
    notify : callable
        ``notify(message)`` for errors and hints.
    """

    #: Emitted after every load attempt (the workflow tabs re-read ``adapter``).
    loaded = Signal()

    def __init__(self, on_encoder: Callable, cache_budget: Callable[[int], None],
                 notify: Callable[[str], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._on_encoder, self._budget_cb, self._notify = on_encoder, cache_budget, notify
        self.adapter: SamAdapter | None = None
        self.toy = False
        self._cancel = False
        self._relay = _Relay(self)
        self._relay.progress.connect(self._show_progress)

        self.folder = QLineEdit(placeholderText="Folder with the bundle's .onnx files")
        self.folder.editingFinished.connect(self.load)
        browse = QPushButton("Browse...")
        browse.clicked.connect(self._browse)
        self.download = QToolButton(text="Download...")
        self.download.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.download.setMenu(self._download_menu())
        self.cancel = QPushButton("Cancel download", visible=False)
        self.cancel.clicked.connect(lambda: setattr(self, "_cancel", True))
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for w in (self.folder, browse, self.download):
            row.addWidget(w)
        self.device = QComboBox()
        self.device.addItems(device_choices())
        self.device.currentTextChanged.connect(lambda _t: self.load())
        self.budget = QSpinBox(minimum=64, maximum=1 << 18, singleStep=256, suffix=" MB")
        self.budget.setValue(1024)
        self.budget.valueChanged.connect(lambda mb: self._budget_cb(int(mb) << 20))
        self.progress = QProgressBar(visible=False)
        self.info = QLabel("No model loaded.", wordWrap=True)

        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Model", row)
        form.addRow("Device", self.device)
        form.addRow("Cache", self.budget)
        form.addRow(self.progress)
        form.addRow(self.cancel)
        form.addRow(self.info)

    # ---- loading ---------------------------------------------------------------------
    def load(self, folder: str | Path | None = None, toy: bool = False) -> SamAdapter | None:
        """Open the bundle in ``folder`` (default: the field's text) on the chosen device."""
        if folder is not None:
            self.folder.setText(str(folder))
            self.toy = toy
        text = self.folder.text().strip()
        if not text:
            return None
        folder = Path(text).expanduser()
        config = RuntimeConfig(providers=self.device.currentText())
        try:
            adapter = open_bundle(folder, config)
            texts = None if adapter.has(Capability.CLICKS) else _detector_texts(adapter, folder)
        except Sam3OnnxError as exc:
            self.adapter, self.toy = None, False
            self.info.setText(f"<b>Not loaded.</b> {exc}")
            self._notify(str(exc))
            self._on_encoder(None, None)
            self.loaded.emit()
            return None
        self.adapter = adapter
        h, w = adapter.input_size
        note = "" if texts is None else "<br>Boxes only: this bundle has no click decoder."
        if texts is not None and not adapter.has(Capability.BOXES):
            note = "<br>Text only: this bundle has no click or box decoder; use the Text tab."
        if self.toy:
            note += f"<br><b style='color:orange'>{TOY_NOTE}</b>"
        weights = "" if adapter.precision is None else f", weights {adapter.precision}"
        self.info.setText(f"{adapter.layout}: {h} x {w} input{weights}, device "
                          f"{self.device.currentText()}{note}")
        model_id = (str(folder.resolve()), adapter.layout)
        self._on_encoder(SliceEncoder(adapter, model_id=model_id), texts)
        self.loaded.emit()
        return adapter

    def load_toy(self) -> None:
        """Build the toy test bundle in a temporary folder and load it."""
        try:
            self.load(build_toy_bundle(), toy=True)
        except Sam3OnnxError as exc:
            self._notify(str(exc))

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder with a SAM 3 ONNX bundle")
        if path:
            self.load(path)

    # ---- downloads -------------------------------------------------------------------
    def _download_menu(self) -> QMenu:
        menu = QMenu(self)
        menu.addAction("Toy test model (no download, not SAM 3)", self.load_toy)
        try:
            from ..models.registry import KNOWN_BUNDLES
        except ImportError:
            act = menu.addAction("(model registry not available in this version)")
            act.setEnabled(False)
            return menu
        menu.addSeparator()
        for spec in KNOWN_BUNDLES:
            caps = set(spec.capabilities)
            usable = "clicks" in caps or "text" in caps
            act = menu.addAction(spec.title, lambda s=spec: self.start_download(s))
            act.setEnabled(bool(spec.downloadable and usable))
            if not usable:
                act.setToolTip("This bundle cannot answer clicks, boxes or text.")
            elif not spec.downloadable:
                act.setToolTip("Not all files are published; see the Models page.")
        return menu

    def start_download(self, spec, token: str | None = None) -> None:
        """Download ``spec`` in a worker (progress bar, cancel button), then load it."""
        try:
            from ..models.download import download_bundle
        except ImportError as exc:
            self._notify(f"Downloads are not available in this version ({exc}).")
            return
        if getattr(spec, "gated", False) and token is None:
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
                raise Sam3OnnxError("Download cancelled; it resumes where it stopped next time.")
            self._relay.progress.emit(name, int(done), total)

        def finished() -> None:
            self.progress.setVisible(False)
            self.cancel.setVisible(False)
            self.download.setEnabled(True)

        workers.start(download_bundle, spec, None, report, token,
                      on_result=lambda folder: self.load(folder),
                      on_error=lambda exc: self._notify(workers.describe(exc)),
                      on_finish=finished)

    def _show_progress(self, name: str, done: int, total: object) -> None:
        if isinstance(total, int) and total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * done / total))
            self.progress.setFormat(f"{name}: {done >> 20} / {total >> 20} MB")
        else:
            self.progress.setRange(0, 0)
