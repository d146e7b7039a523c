"""The SAM 3 dock (one widget, a tab per workflow): pick an image and a model, click, box, commit.

Keyboard (with the prompt or box layer selected, or any layer where napari has no binding):
``t`` toggles positive/negative clicks, ``c`` commits the preview, ``Shift+C`` clears the
plane's prompts and preview; on the prompt layers ``Ctrl+Z`` / ``Ctrl+Shift+Z`` undo and redo the
last commit.
"""

from __future__ import annotations

from functools import partial

from napari.layers import Image, Labels
from napari.utils.notifications import show_info
from qtpy.QtCore import QEvent
from qtpy.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from napari_sam3_onnx._napari.clicks.ahead import AheadControl
from napari_sam3_onnx._napari.clicks.fov import make_fov_control
from napari_sam3_onnx._napari.clicks.refine import RefineControl, RefiningSession
from napari_sam3_onnx._napari.compact import compact_combo
from napari_sam3_onnx._napari.encode_status import EncodeStatus
from napari_sam3_onnx._napari.kept import Kept, remember, restore
from napari_sam3_onnx._napari.layers import (
    OBJECTS_NAME,
    image_source,
    is_scratch,
    plane_shape,
    same,
    set_polarity,
)
from napari_sam3_onnx._napari.model.panel import ModelPanel
from napari_sam3_onnx._napari.panels import extra_panels
from napari_sam3_onnx._napari.qt_widgets import wrapped_label
from napari_sam3_onnx._napari.save_labels import SaveLabelsButton
from napari_sam3_onnx._napari.series.panel import SeriesPanel
from napari_sam3_onnx._napari.series_hint import SeriesHint
from napari_sam3_onnx._napari.tiling_switch import tile_switch, tile_tooltip

KEYS = {"t": "toggle", "c": "commit", "Shift-C": "clear"}
#: Bound on the prompt layers only, where napari binds nothing: undo the last commit from where
#: the user annotates (the target Labels layer keeps its own Ctrl+Z).
LAYER_KEYS = {"Control-Z": "undo", "Control-Shift-Z": "redo"}
NEW_TARGET = f"new '{OBJECTS_NAME}' layer"


class SamDock(QWidget):
    """The plugin's one dock: the model, the image, and a tab per workflow (clicks and boxes first).

    Parameters
    ----------
    napari_viewer : napari.Viewer
        The viewer (napari passes it when the widget is opened from the Plugins menu).
    kept : Kept, optional
        The viewer's state that outlives the dock (:mod:`.kept`): its workspace, and the model
        a closed dock had loaded, shown again here (default: new, nothing loaded).
    """

    def __init__(self, napari_viewer, parent: QWidget | None = None,
                 kept: Kept | None = None) -> None:
        super().__init__(parent)
        self.viewer = napari_viewer
        self._updating = False
        self.kept = kept if kept is not None else Kept()
        self.workspace = self.kept.workspace  # the model, encoder and caches every tab shares
        self.session = RefiningSession(napari_viewer, self.workspace, notify=self.notify,
                                    busy=self._busy, inform=self.inform)
        self._layer_names: dict = {}  # unique_id -> name, kept on the Qt thread for workers
        self.model = ModelPanel(self._model_changed, self._set_budget, self.notify,
                                image_name=lambda ref: self._layer_names.get(ref.source)
                                or getattr(ref.source, "name", ""),
                                workspace=self.workspace, inform=self.inform)
        # The one tiling setting every tab follows: in the dock's settings, seen from each tab.
        self.tile = tile_switch(self.workspace, self.session.schedule)
        self.model.add_setting("Large planes", self.tile)

        self.image = compact_combo()
        self.image.currentIndexChanged.connect(lambda _i: self._image_changed())
        self.image.activated.connect(lambda _i: self._image_changed(force=True))
        self.target = compact_combo()
        self.target.currentIndexChanged.connect(lambda _i: self._target_changed())
        self.positive = QRadioButton("Positive")
        self.positive.setChecked(True)
        self.negative = QRadioButton("Negative")
        self.positive.toggled.connect(self._polarity_changed)
        self.overwrite = QCheckBox("Overwrite other objects")
        self.overwrite.toggled.connect(lambda on: setattr(self.session, "overwrite", bool(on)))
        self.ahead = AheadControl(self.workspace)  # encode ahead: on where memory allows
        self.session.ahead = self.ahead.follow
        self.prefetch = self.ahead.box
        self.fov = make_fov_control(self.session)
        commit = QPushButton("Commit [c]")
        commit.clicked.connect(self.commit)
        clear = QPushButton("Clear [Shift+C]")
        clear.clicked.connect(self.clear)
        self.status = wrapped_label()
        self.encoding = EncodeStatus(self.session.cancel, self.status.setText)
        self.progress = self.encoding.bar

        polarity = QHBoxLayout()
        polarity.addWidget(self.positive)
        polarity.addWidget(self.negative)
        polarity.addWidget(QLabel("[t] toggles"))
        buttons = QHBoxLayout()
        buttons.addWidget(commit)
        buttons.addWidget(clear)
        data = QFormLayout()
        data.addRow("Image", self.image)
        data.addRow("Commit to", self.target)
        data.addRow("Clicks", polarity)
        box = QGroupBox("Prompts")
        box.setLayout(data)
        help_text = wrapped_label(
            "Click on an object in 'SAM prompts' (add mode); draw rectangles in 'SAM boxes'. "
            "Only prompts on the plane shown count.")
        clicks_tab = QWidget()
        clicks = QVBoxLayout(clicks_tab)
        clicks.addWidget(box)
        clicks.addWidget(help_text)
        self.refine = RefineControl(self.session, lambda: self.target.currentData())
        for w in (self.refine, self.overwrite, self.ahead, self.fov):
            clicks.addWidget(w)
        clicks.addLayout(buttons)
        clicks.addStretch(1)
        # Further workflows (text search, propagation) share the model, cache and image.
        self.tabs = QTabWidget()
        self.tabs.addTab(clicks_tab, "Clicks && boxes")
        self.panels = {title: make(self) for title, make in extra_panels()}
        for title, panel in self.panels.items():
            self.tabs.addTab(panel, title)
        self.tabs.currentChanged.connect(lambda _i: self.status.setText(""))  # not stale news
        layout = QVBoxLayout(self)
        layout.addWidget(self.model)
        self.series_hint = SeriesHint(napari_viewer, self.image)  # every tab's image
        layout.addWidget(self.series_hint)
        self.series = SeriesPanel(self)  # a folder's images one by one, every tab on each
        self.ahead.follow_series(self.series.navigator.ahead)  # then the next image ahead
        layout.addWidget(self.series)
        layout.addWidget(self.tabs)
        self.save_labels = SaveLabelsButton(napari_viewer, self.notify)
        layout.addWidget(self.save_labels)
        layout.addWidget(self.encoding)
        layout.addWidget(self.ahead.line)
        layout.addWidget(self.status)

        napari_viewer.layers.events.inserted.connect(self._refresh_choices)
        napari_viewer.layers.events.removed.connect(self._refresh_choices)
        napari_viewer.layers.events.moved.connect(self._refresh_choices)
        self._bind_keys(napari_viewer)
        self._bound_layers: list = []
        self._teardown = partial(_teardown, napari_viewer, self.session, self._bound_layers,
                                 self.ahead.scheduler, self.model.loads.drop,
                                 self.series.release)  # a load in flight: dropped
        self._docked = False
        self.moving = False  # True while a menu entry moves the widget into its own dock
        self.destroyed.connect(self._teardown)
        self._refresh_choices()
        restore(self.kept, self.model)  # the model a closed dock of this viewer had loaded

    # ---- actions ---------------------------------------------------------------------
    def commit(self, _viewer=None) -> list[int]:
        """Commit the preview (button and ``c``)."""
        return self.session.commit()

    def clear(self, _viewer=None) -> None:
        """Clear the plane's prompts and the preview (button and ``Shift+C``)."""
        self.session.clear()

    def undo(self, _viewer=None) -> None:
        """Undo the last commit (``Ctrl+Z`` on the prompt layers)."""
        self.session.undo()

    def redo(self, _viewer=None) -> None:
        """Redo the commit undone last (``Ctrl+Shift+Z`` on the prompt layers)."""
        self.session.undo(redo=True)

    def toggle(self, _viewer=None) -> None:
        """Switch the next clicks between positive and negative (``t``)."""
        (self.negative if self.positive.isChecked() else self.positive).setChecked(True)

    def show_tab(self, title: str) -> None:
        """Select the workflow tab titled ``title`` ("Clicks & boxes", "Text", "Propagate")."""
        for i in range(self.tabs.count()):
            if self.tabs.tabText(i).replace("&&", "&") == title:
                self.tabs.setCurrentIndex(i)
                return
        raise ValueError(f"No tab {title!r}.")

    def load_bundle(self, folder, toy: bool = False) -> None:
        """Load a bundle folder (``toy`` marks the test model clearly in the widget)."""
        self.model.load(folder, toy=toy)

    def event(self, event: QEvent | None) -> bool:
        """Tear down when napari takes the widget out of its dock (the dock's close button)."""
        if event is not None and event.type() == QEvent.Type.ParentChange:
            if self.parent() is not None:
                self._docked, self.moving = True, False
            elif self._docked and not self.moving:
                self._teardown()
        return super().event(event)

    # ---- wiring ----------------------------------------------------------------------
    def _bind_keys(self, viewer) -> None:
        for key, name in KEYS.items():
            viewer.bind_key(key, getattr(self, name), overwrite=True)

    def _bind_layer_keys(self) -> None:
        lay = self.session.layers
        if lay is None:
            return
        for layer in (lay.points, lay.shapes):
            if layer in self._bound_layers:
                continue
            for key, name in {**KEYS, **LAYER_KEYS}.items():
                if same(layer, lay.shapes) and key == "t":
                    continue  # napari's 't' draws paths in Shapes layers
                layer.bind_key(key, lambda _layer, n=name: getattr(self, n)(), overwrite=True)
            self._bound_layers.append(layer)

    def _refresh_choices(self, _event=None) -> None:
        if self._updating:
            return
        current = self.image.currentData()
        images = [la for la in self.viewer.layers if isinstance(la, Image)]
        self._layer_names.clear()
        self._layer_names.update({image_source(la): la.name for la in images})
        self.image.blockSignals(True)
        self.image.clear()
        for layer in images:
            self.image.addItem(layer.name, layer)
        if current in images:
            self.image.setCurrentIndex(images.index(current))
        self.image.blockSignals(False)
        if not same(self.image.currentData(), self.session.image):
            self._image_changed()
        self._refresh_targets()

    def _refresh_targets(self) -> None:
        image = self.session.image
        shape = None if image is None else plane_shape(image)
        ours = None if self.session.layers is None else self.session.layers
        labels = [la for la in self.viewer.layers if isinstance(la, Labels)
                  and shape is not None and la.data.shape == shape and not is_scratch(la)
                  and (ours is None or not same(la, ours.preview))]
        self.target.blockSignals(True)
        self.target.clear()
        for layer in labels:
            self.target.addItem(layer.name, layer)
        if not labels:
            self.target.addItem(NEW_TARGET, None)
        if ours is not None and ours.target in labels:
            self.target.setCurrentIndex(labels.index(ours.target))
        self.target.blockSignals(False)

    def _image_changed(self, force: bool = False) -> None:
        """A new image (or, with ``force``, the same one again: recreate deleted layers)."""
        image = self.image.currentData()
        if (same(image, self.session.image) and not force) or self._updating:
            return
        self._updating = True  # set_image adds layers, which would re-enter here
        try:
            self.session.set_image(image, self.target.currentData() if force else None)
        finally:
            self._updating = False
        self._polarity_changed(self.positive.isChecked())
        self._bind_layer_keys()
        self._refresh_targets()

    def _target_changed(self) -> None:
        target = self.target.currentData()
        if target is not None and self.session.layers is not None and not is_scratch(target):
            self.session.layers.target = target

    def _polarity_changed(self, positive: bool) -> None:
        if self.session.layers is None:
            return
        set_polarity(self.session.layers.points, bool(positive))

    def _model_changed(self) -> None:
        """Another model (or none): the clicks run again, the tooltip gives its threshold."""
        self.session.model_changed()
        remember(self.kept, self.model)
        self.tile.setToolTip(tile_tooltip(self.workspace.adapter))

    def _set_budget(self, nbytes: int) -> None:
        self.workspace.cache.budget_bytes = nbytes

    # ---- feedback --------------------------------------------------------------------
    def notify(self, message: str) -> None:
        """What the user must read (a refusal, a failure): the status line and a notification."""
        self.status.setText(message)
        show_info(message)

    def inform(self, message: str) -> None:
        """Routine news (a commit, an undo, a finished run): the status line, no pop-up."""
        self.status.setText(message)
        self.viewer.status = message

    def _busy(self, on: bool, text: str) -> None:
        """An encode began (``on``) or ended; ``text`` for the status line."""
        if on:
            self.encoding.start(text)
        else:
            self.encoding.stop(completed=bool(text))
            if text:
                self.status.setText(text)
        self.viewer.status = text


def _teardown(viewer, session, bound_layers: list, ahead, drop_loads, close_series=None,
              _obj=None) -> None:
    """The widget is gone: stop the session, unbind its keys, drop a bundle load in flight.

    Runs once, whichever comes first (the dock closed, the widget destroyed, the interpreter
    exiting), and never raises: an exception in a Qt slot at exit aborts the process.
    """
    if session.closed:
        return
    drop_loads()  # its result would attach a model behind the reopened dock's back
    try:
        session.close()
        ahead.close()  # its background encode is stopped, its thread ends
        if close_series is not None:
            close_series()
        for owner in (viewer, *bound_layers):
            for key in (*KEYS, *(LAYER_KEYS if owner is not viewer else ())):
                owner.bind_key(key, None)
    except (RuntimeError, AttributeError, KeyError):  # Qt or napari already half gone
        pass
