"""The widget's model section: bundle folder, Download..., device and cache budget.

Opening a bundle only reads the graphs' headers; the weights load in a worker on the first
encode. The registry and downloader are imported lazily: without them the Download menu is
disabled and the folder field still works.
"""

from __future__ import annotations

import json
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

from napari_sam3_onnx._napari import workers
from napari_sam3_onnx._napari.model.store_row import StoreRow
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.encoding import SliceEncoder
from napari_sam3_onnx.engine.store.lookup import open_lookup_encoder
from napari_sam3_onnx.models.base import Capability, SamAdapter
from napari_sam3_onnx.models.bundle import open_bundle
from napari_sam3_onnx.models.errors import Sam3OnnxError
from napari_sam3_onnx.models.runtime import (
    PROVIDER_ALIASES,
    RuntimeConfig,
    available_providers,
    resolve_providers,
)

TOY_NOTE = ("TOY TEST MODEL: tiny hand-written graphs that outline bright blobs, so every tab "
            "can be tried on the sample. It is not SAM 3; load real SAM 3 weights for real work.")


class _Relay(QObject):
    """Carries download progress from the worker thread to the Qt thread."""

    progress = Signal(str, int, object)


#: Providers onnxruntime lists that do not run the model on this machine (Azure sends it to a
#: remote endpoint); they are not offered as a device.
NOT_LOCAL = frozenset({"AzureExecutionProvider"})
#: Words for a provider on the model line.
DEVICE_NAMES = {"CPUExecutionProvider": "CPU", "CUDAExecutionProvider": "CUDA GPU",
                "TensorrtExecutionProvider": "TensorRT GPU", "CoreMLExecutionProvider": "CoreML",
                "DmlExecutionProvider": "DirectML GPU"}
#: What each capability lets the user do, in the order the tabs show them.
CAPABILITY_WORDS = ((Capability.CLICKS, "clicks"), (Capability.BOXES, "boxes"),
                    (Capability.TEXT, "text"), (Capability.EXEMPLARS, "exemplars"),
                    (Capability.MEMORY, "propagation"))


def device_choices() -> list[str]:
    """``"auto"`` plus the short names of the local providers this onnxruntime offers."""
    short = {full: alias for alias, full in reversed(list(PROVIDER_ALIASES.items()))}
    return ["auto", *[short.get(p, p) for p in available_providers() if p not in NOT_LOCAL]]


def _registered(folder: Path):
    """The registry entry ``folder`` was downloaded (or built) for, or None."""
    try:
        from napari_sam3_onnx.models.registry import KNOWN_BUNDLES, bundle_dir
    except ImportError:
        return None
    folder = folder.resolve()
    for spec in KNOWN_BUNDLES:
        home = bundle_dir(spec.id).resolve()
        if folder == home or folder.parent == home:
            return spec
    return None


def bundle_precision(folder: Path) -> str | None:
    """Storage precision from the bundle's ``manifest.json`` or its registry entry."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if isinstance(manifest, dict) and manifest.get("precision"):
            return str(manifest["precision"])
    except (OSError, ValueError):
        pass
    spec = _registered(folder)
    return spec.precision if spec is not None else None


def bundle_name(folder: Path, toy: bool = False) -> str:
    """What the Model field shows: the toy's or registry entry's name, else the folder's."""
    if toy:
        return "Toy model (not SAM 3)"
    spec = _registered(folder)
    return spec.id if spec is not None else folder.name


def model_line(adapter: SamAdapter, precision: str | None, providers: list[str],
               toy: bool = False) -> str:
    """``"SAM 3 (nso-sam3) · clicks, boxes, text, propagation · fp32 · CPU"``."""
    family = "Toy model, not SAM 3" if toy else (
        "SAM 3.1" if "3.1" in adapter.layout else "SAM 3")
    can = ", ".join(word for cap, word in CAPABILITY_WORDS if adapter.has(cap)) or "nothing"
    device = DEVICE_NAMES.get(providers[0], providers[0]) if providers else "CPU"
    parts = [f"{family} ({adapter.layout})", can, *([precision] if precision else []), device]
    return " · ".join(parts)


def _detector_texts(adapter: SamAdapter, folder: Path) -> TextCache:
    """Boxes through the concept detector (``"visual"``) and text search need the tokenizer."""
    if not adapter.has(Capability.TEXT):
        caps = ", ".join(sorted(c.value for c in adapter.capabilities))
        raise Sam3OnnxError(f"The {adapter.layout} bundle cannot answer clicks, boxes or text "
                            f"(it can: {caps}). Choose a bundle with a SAM head or a detector.")
    return TextCache(adapter, ClipTokenizer.from_folder(
        folder, adapter.concept_detector.context_length))


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
    image_name : callable, optional
        ``ref -> str``: an image's name to look for in an attached embedding store (a
        layer's name; entries are found by content all the same).
    """

    #: Emitted after every load attempt (the workflow tabs re-read ``adapter``).
    loaded = Signal()

    def __init__(self, on_encoder: Callable, cache_budget: Callable[[int], None],
                 notify: Callable[[str], None], parent: QWidget | None = None,
                 image_name: Callable | None = None) -> None:
        super().__init__(parent)
        self._on_encoder, self._budget_cb, self._notify = on_encoder, cache_budget, notify
        self._image_name = image_name
        self.adapter: SamAdapter | None = None
        self._texts: TextCache | None = None  # what the click session needs (detector-only)
        self._language: TextCache | None = None  # the one language cache of this model
        self.toy = False
        self._loaded: tuple[Path, str] | None = None  # (folder, name the field shows)
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
        self.store = StoreRow()
        self.store.changed.connect(self._hand_on)

        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Model", row)
        form.addRow("Device", self.device)
        form.addRow("Cache", self.budget)
        form.addRow("Embeddings", self.store)
        form.addRow(self.progress)
        form.addRow(self.cancel)
        form.addRow(self.info)

    @property
    def bundle_folder(self) -> Path | None:
        """Folder of the loaded bundle (the field shows its name), None when none is loaded."""
        return self._loaded[0] if self._loaded is not None else None

    def text_cache(self) -> TextCache | None:
        """The loaded model's one language cache (every tab's), built on first use.

        None without a model or a language encoder.

        Raises
        ------
        Sam3OnnxError
            The bundle folder has no tokenizer file.
        """
        adapter = self.adapter
        if self._language is None and adapter is not None and adapter.has(Capability.TEXT):
            folder = self.bundle_folder or Path()
            self._language = TextCache(
                adapter, ClipTokenizer.from_folder(folder,
                                                   adapter.concept_detector.context_length))
        return self._language

    # ---- loading ---------------------------------------------------------------------
    def load(self, folder: str | Path | None = None, toy: bool = False) -> SamAdapter | None:
        """Open the bundle in ``folder`` (default: the field's text) on the chosen device.

        The field then shows the bundle's name, with the full path in its tooltip; while it
        still shows that name, reloading (a new device) reopens the same folder.
        """
        if folder is not None:
            self.folder.setText(str(folder))
            self.toy = toy
        text = self.folder.text().strip()
        if not text:
            return None
        if self._loaded is not None and text == self._loaded[1]:
            folder = self._loaded[0]  # the same bundle again (e.g. on another device)
        else:
            if folder is None:  # a path typed into the field
                self.toy = False
            folder = Path(text).expanduser()
        config = RuntimeConfig(providers=self.device.currentText())
        try:
            adapter = open_bundle(folder, config)
            texts = None if adapter.has(Capability.CLICKS) else _detector_texts(adapter, folder)
        except Sam3OnnxError as exc:
            self.adapter, self.toy, self._loaded = None, False, None
            self._texts = self._language = None
            self.folder.setToolTip(str(folder))
            self.info.setText(f"<b>Not loaded.</b> {exc}")
            self._notify(str(exc))
            self._on_encoder(None, None)
            self.loaded.emit()
            return None
        self.adapter, self._language = adapter, texts
        name = bundle_name(folder, self.toy)
        self._loaded = (folder, name)
        self.folder.setText(name)
        self.folder.setToolTip(str(folder.resolve()))
        note = "" if texts is None else "<br>Boxes only: this bundle has no click decoder."
        if texts is not None and not adapter.has(Capability.BOXES):
            note = "<br>Text only: this bundle has no click or box decoder; use the Text tab."
        if self.toy:
            note += f"<br><b style='color:orange'>{TOY_NOTE}</b>"
        line = model_line(adapter, bundle_precision(folder),
                          resolve_providers(self.device.currentText()), self.toy)
        self.info.setText(f"{line}{note}")
        self._texts = texts
        self._hand_on()
        self.loaded.emit()
        return adapter

    def _hand_on(self) -> None:
        """Give the session the one encoder every tab uses (store-backed when one is chosen).

        A store of another bundle or precision is refused with the store's own message and
        the model works from memory only.
        """
        if self.adapter is None or self._loaded is None:
            return
        folder = self._loaded[0]
        model_id = (str(folder.resolve()), self.adapter.layout)
        encoder: SliceEncoder = SliceEncoder(self.adapter, model_id=model_id)
        if self.store.path is not None:
            try:
                encoder = open_lookup_encoder(self.adapter, folder, self.store.path,
                                              self.store.write.isChecked(), None, model_id,
                                              self._image_name)
            except Sam3OnnxError as exc:
                self.store.detach()
                self._notify(f"Embedding store not used: {exc}")
        self._on_encoder(encoder, self._texts)

    def load_toy(self) -> None:
        """Load the registry's toy model, building it first if it is not cached yet (~1 s)."""
        try:
            from napari_sam3_onnx.models.download import download_bundle
            from napari_sam3_onnx.models.registry import get_bundle

            folder = download_bundle(get_bundle("toy"))
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
            self.load(path)

    # ---- downloads -------------------------------------------------------------------
    def _download_menu(self) -> QMenu:
        menu = QMenu(self)
        try:
            from napari_sam3_onnx.models.registry import KNOWN_BUNDLES
        except ImportError:
            act = menu.addAction("(model registry not available in this version)")
            act.setEnabled(False)
            return menu
        for spec in KNOWN_BUNDLES:
            if spec.builder:  # the toy: built here, nothing to download
                menu.addAction(spec.title, self.load_toy)
                menu.addSeparator()
                continue
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
            from napari_sam3_onnx.models.download import download_bundle
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
