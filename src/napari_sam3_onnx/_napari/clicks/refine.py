"""Refining a label that is already in a Labels layer, in the Clicks tab.

:class:`RefiningSession` is the click session with one more state: a picked label
(:class:`~napari_sam3_onnx.api.refine.LabelTarget`). While a label is picked, the plane's clicks
refine that label instead of prompting new objects: each run asks
:func:`~napari_sam3_onnx.api.refine.refine_prompt` for the prompt (the label's box, its mask as
the mask prompt where the decoder takes one, the clicks) and runs it through the same
:func:`~napari_sam3_onnx.api.clicks.run_job` as every click, on the whole plane. Commit replaces
exactly that id's pixels on that plane of the layer it was picked from
(:func:`~napari_sam3_onnx.engine.label_prompt.replace_label`), as one undo step.

A label is picked with Alt+click on it while its Labels layer is the active layer
(:meth:`RefiningSession.on_mouse`, a viewer mouse callback), or from the Clicks tab's id field
(:class:`RefineControl`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from napari.layers import Labels
from qtpy.QtWidgets import QGroupBox, QHBoxLayout, QPushButton, QSpinBox, QVBoxLayout

from napari_sam3_onnx._napari import layers
from napari_sam3_onnx._napari.clicks import prompts
from napari_sam3_onnx._napari.clicks.session import ClickSession
from napari_sam3_onnx._napari.commit_entries import refine_entry
from napari_sam3_onnx._napari.labels_writer import write_planes
from napari_sam3_onnx._napari.qt_widgets import wrapped_label
from napari_sam3_onnx.api import clicks as click_flow
from napari_sam3_onnx.api.refine import LabelTarget, mask_note, pick_label, refine_prompt
from napari_sam3_onnx.engine.label_prompt import replace_label
from napari_sam3_onnx.models.errors import Sam3OnnxError


def write_label(layer: Labels, index: tuple[int, ...], label_id: int, mask: np.ndarray,
                entry: Mapping | None = None) -> int:
    """Replace label ``label_id`` on plane ``index`` of ``layer`` by ``mask``; one undo step.

    Only that id's pixels change (:func:`replace_label`), written by the one undoable writer
    (:func:`~napari_sam3_onnx._napari.labels_writer.write_planes`; one ``layer.undo()``
    removes it all). Returns the number of pixels changed.
    """
    plane = np.asarray(layer.data[tuple(index)])
    new = replace_label(plane, label_id, mask)
    return write_planes(layer, [(tuple(index), new, new != plane)], overwrite=True,
                        entry=entry).pixels


class RefiningSession(ClickSession):
    """A :class:`ClickSession` that can refine a picked label (module docstring).

    Attributes
    ----------
    refining : LabelTarget or None
        The label being refined (None: clicks prompt new objects).
    source : napari.layers.Labels or None
        The layer it was picked from (the commit writes there).
    changed : callable
        Called after the picked label changes (the panel updates its note).
    """

    def __init__(self, viewer, *args, **kwargs) -> None:
        super().__init__(viewer, *args, **kwargs)
        self.refining: LabelTarget | None = None
        self.source: Labels | None = None
        self.changed: Callable[[], None] = lambda: None
        self.chains: dict[tuple, list[int]] = {}  # per object: click counts of its runs
        viewer.mouse_drag_callbacks.append(self.on_mouse)

    @property
    def key(self) -> tuple:
        """The preview key of the picked label."""
        return ("label", 0 if self.refining is None else self.refining.label_id)

    # ---- picking ---------------------------------------------------------------------
    def pick(self, layer: Labels, label_id: int) -> LabelTarget | None:
        """Refine label ``label_id`` of ``layer`` on the current plane (None: refused, said why)."""
        lay, adapter = self.layers, self.workspace.adapter
        try:
            if lay is None or adapter is None:
                raise Sam3OnnxError("Choose an image and load a model first.")
            if tuple(layer.data.shape) != layers.plane_shape(lay.image):
                raise Sam3OnnxError(f"'{layer.name}' has shape {layer.data.shape}, not the "
                                    f"image's {layers.plane_shape(lay.image)}.")
            index = layers.current_index(self.viewer, lay.image)
            target = pick_label(adapter, np.asarray(layer.data[index]), label_id, index)
        except Sam3OnnxError as exc:
            self._say(str(exc))
            return None
        self.clear()  # the plane's earlier prompts were for something else
        self.refining, self.source = target, layer
        where = layers.index_label(lay.image, index)
        self._say(f"Refining label {target.label_id} of '{layer.name}' on {where}: click to add "
                  "(positive) or remove (negative), then Commit.", warn=False)
        self.viewer.layers.selection.active = lay.points
        lay.points.mode = "add"
        self.changed()
        self.schedule()
        return target

    def stop(self) -> None:
        """Stop refining: clicks prompt new objects again."""
        if self.refining is not None:
            self.refining = self.source = None
            self._forget()
            self.changed()
            self.schedule()

    def model_changed(self) -> None:
        """Another model: a picked label's mask prompt was made for the old one; pick again."""
        if self.refining is not None:
            self._say(f"Stopped refining label {self.refining.label_id}: the model changed; "
                      "pick the label again.")
            self.refining = self.source = None
            self.changed()
        super().model_changed()

    def on_mouse(self, viewer, event):
        """Alt+click on a label of the active Labels layer picks it (a viewer mouse callback).

        A generator: the label under the press is picked on release, so the prompt layer made
        active then does not receive this click as a prompt.
        """
        layer = viewer.layers.selection.active
        if "Alt" not in event.modifiers or not isinstance(layer, Labels) or \
                layers.is_scratch(layer) or self.layers is None:
            return
        value = layer.get_value(event.position, view_direction=event.view_direction,
                                dims_displayed=event.dims_displayed, world=True)
        yield
        while event.type == "mouse_move":
            yield
        if value is not None and int(value) > 0:
            self.pick(layer, int(value))

    # ---- the run and the commit ------------------------------------------------------
    def _apply(self, result: click_flow.JobResult) -> None:
        """Show the result; note each object's chain of runs (for the commit log).

        A run that fed the previous result's logits back extends that object's chain; any other
        starts a new one. A replay runs the chain's prompts in turn, feeding back alike.
        """
        before = dict(self._last)
        super()._apply(result)
        for key, prompt, _mask in result.masks:
            if self._last.get(key, (None,))[0] is not prompt:
                continue  # stale: not shown
            prev = before.get(key)
            fed = prev is not None and prompt.mask_logits is not None and \
                prompt.mask_logits is prev[1].low_res_logits
            self.chains[key] = [*(self.chains.get(key, []) if fed else []), len(prompt.labels)]

    def run(self) -> None:
        """Refine the picked label with the plane's clicks (without one: the plain run)."""
        target, lay, encoder = self.refining, self.layers, self.encoder
        if target is None or lay is None or encoder is None:
            super().run()
            return
        self._debounce.ran()
        try:
            index = layers.current_index(self.viewer, lay.image)
            clicks, labels, _ = prompts.read_clicks(lay.points, lay.image, index)
        except Sam3OnnxError as exc:
            self._say(str(exc))
            return
        if index != target.index or self.source not in self.viewer.layers:
            self._say(f"Stopped refining label {target.label_id}: its plane or layer is gone.",
                      warn=False)
            self.stop()
            return
        if index != self._index:
            self._last.clear()
            self._index = index
        prompt = refine_prompt(target, clicks, labels, self._last.get(self.key))
        ref = layers.slice_ref(lay.image, index, self.data_version(lay.image))
        job = click_flow.Job(self.generation, ref, [(self.key, prompt)])
        self._start(encoder, job, None, lay.image, index)

    def commit(self) -> list[int]:
        """Replace the picked label by the preview (without one: the plain commit)."""
        target, source = self.refining, self.source
        if target is None or source is None:
            return super().commit()
        if self._applied != self.generation or self._shown != target.index:
            self._say("The preview is still being updated; commit again when it shows.")
            return []
        if not self._current:
            self._say("SAM finds no object here; add a positive click on the object or Stop "
                      "refining.")
            return []
        n = write_label(source, target.index, target.label_id, self._current[0].mask,
                        refine_entry(self, target.index, target.label_id))
        self._committed_to = source
        self._say(f"Replaced label {target.label_id} in '{source.name}' ({n} pixels changed; "
                  "Ctrl+Z undoes it).", warn=False)
        self.clear()
        self.stop()
        return [target.label_id]

    def close(self) -> None:
        """Stop listening to the viewer's mouse too."""
        if self.on_mouse in self.viewer.mouse_drag_callbacks:
            self.viewer.mouse_drag_callbacks.remove(self.on_mouse)
        super().close()


class RefineControl(QGroupBox):
    """The Clicks tab's "Refine a label" box: an id field, Refine / Stop and what is used.

    The id is looked up in the tab's "Commit to" layer (``target()``); Alt+click picks from
    any Labels layer.
    """

    def __init__(self, session: RefiningSession, target: Callable[[], Labels | None]) -> None:
        super().__init__("Refine a label")
        self.session, self.target = session, target
        self.label_id = QSpinBox()
        self.label_id.setRange(0, 2**31 - 1)
        self.label_id.setSpecialValueText("id")
        self.label_id.setToolTip("A label id of the 'Commit to' layer, on this plane.")
        self.go = QPushButton("Refine")
        self.go.clicked.connect(self.refine)
        self.halt = QPushButton("Stop")
        self.halt.clicked.connect(session.stop)
        self.note = wrapped_label("Alt+click a label in a Labels layer (the active layer), or "
                                  "type its id: clicks then refine it.")
        row = QHBoxLayout()
        for w in (self.label_id, self.go, self.halt):
            row.addWidget(w)
        box = QVBoxLayout(self)
        box.addLayout(row)
        box.addWidget(self.note)
        session.changed = self.update_note
        self.update_note()

    def refine(self) -> bool:
        """Pick the typed id in the "Commit to" layer; returns whether it was picked."""
        layer = self.target()
        if layer is None or self.label_id.value() == 0:
            self.session.notify("Type a label id of the 'Commit to' layer, or Alt+click a "
                                "label.")
            return False
        return self.session.pick(layer, self.label_id.value()) is not None

    def update_note(self) -> None:
        """Say what is refined and whether its outline reaches the decoder."""
        target, source = self.session.refining, self.session.source
        self.halt.setEnabled(target is not None)
        if target is None or source is None:
            self.note.setText("Alt+click a label in a Labels layer (the active layer), or type "
                              "its id: clicks then refine it.")
            return
        self.label_id.setValue(target.label_id)
        how = mask_note(self.session.workspace.adapter) or (
            "Its outline and box prompt SAM (mask prompt); clicks refine it.")
        self.note.setText(f"Refining label {target.label_id} of '{source.name}'. {how} Commit "
                          "replaces only this label on this plane.")
