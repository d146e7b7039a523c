"""The state of click-and-box annotation on one viewer: layers, model, jobs, preview, commit.

A :class:`ClickSession` is an ordinary object (no singleton): the dock widget owns one, a test
can build one. It listens to the prompt layers and the viewer's slider, debounces changes
(:data:`DEBOUNCE_MS`), runs each plane's prompts in a worker and applies the result on the Qt
thread only if nothing changed meanwhile (the *generation* counter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from napari.layers import Image, Labels

from napari_sam3_onnx._napari import commit, layers, workers
from napari_sam3_onnx._napari.clicks import fov, prompts, removal
from napari_sam3_onnx._napari.clicks.debounce import Debouncer
from napari_sam3_onnx._napari.hints import NO_MODEL_FOR_CLICKS, contrast_hint
from napari_sam3_onnx.api import clicks as click_flow
from napari_sam3_onnx.api.prompts import group_objects, with_feedback
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt
from napari_sam3_onnx.models.errors import Sam3OnnxError

#: Quiet time after the last prompt change before the model runs.
DEBOUNCE_MS = 150


class ClickSession:
    """Clicks and boxes on one image of one viewer.

    Parameters
    ----------
    viewer : napari.Viewer
        The viewer.
    workspace : Workspace, optional
        The model, encoder, caches, tiling and data versions all tabs share (default: new).
    notify : callable, optional
        ``notify(message)`` for things the user must read (errors, hints).
    busy : callable, optional
        ``busy(on, text)`` while a plane is being encoded.
    inform : callable, optional
        ``inform(message)`` for routine news (a commit, an undo) that needs no pop-up;
        default ``notify``.
    """

    def __init__(self, viewer, workspace: Workspace | None = None,
                 notify: Callable[[str], None] | None = None,
                 busy: Callable[[bool, str], None] | None = None,
                 inform: Callable[[str], None] | None = None) -> None:
        self.viewer = viewer
        self.workspace = workspace if workspace is not None else Workspace()
        self.notify = notify or (lambda _msg: None)
        self.inform = inform or self.notify
        self.busy = busy or (lambda _on, _text: None)
        self.layers: layers.PromptLayers | None = None
        self.generation = 0
        self.overwrite = False
        self.ahead: Callable[[SliceRef, Image], None] | None = None  # encode ahead (.ahead)
        self.view = fov.ViewMode(self.workspace)  # whole plane, field of view or tiles
        self.messages: list[str] = []
        self.closed = False
        self._committed_to: Labels | None = None  # where Ctrl+Z on the prompt layers undoes
        self._drawing = False  # a rectangle is being drawn in the boxes layer
        self._last: dict[tuple, tuple[Prompt, ObjectMask]] = {}
        self._shown: tuple[int, ...] | None = None
        self._current: list[ObjectMask] = []
        self._index: tuple[int, ...] | None = None
        self._encoding = 0
        self._cancelled = False  # the user stopped waiting for the encodes out now
        self._running = 0
        self._applied = -1
        self._debounce = Debouncer(self.run, DEBOUNCE_MS)
        viewer.dims.events.current_step.connect(self._on_step)
        viewer.dims.events.ndisplay.connect(self._on_step)
        viewer.layers.events.removed.connect(self._on_removed)

    # ---- setup ----------------------------------------------------------------------
    @property
    def image(self) -> Image | None:
        """The image being annotated."""
        return None if self.layers is None else self.layers.image

    @property
    def encoder(self) -> SliceEncoder | None:
        """The workspace's encoder (None without a model)."""
        return self.workspace.encoder

    @property
    def texts(self) -> TextCache | None:
        """The workspace's :meth:`~Workspace.box_texts` (detector-only bundles' boxes)."""
        return self.workspace.box_texts()

    def model_changed(self) -> None:
        """The workspace has another model (or none): drop the preview and run again."""
        self._forget()
        self.schedule()

    def set_image(self, image: Image | None, target: Labels | None = None) -> None:
        """Annotate ``image``: find or create its prompt, preview and target layers.

        The previous image's empty prompt, box and preview layers (and its target if nothing
        was written into it) are removed, so choosing images does not pile up layers.
        """
        old = self.layers
        self._disconnect()
        self._forget()
        self.layers = None
        if old is not None and not layers.same(old.image, image):
            layers.remove_unused(self.viewer, old)
        if image is None:
            return
        self.layers = layers.make_prompt_layers(self.viewer, image, target)
        points, shapes = self.layers.points, self.layers.shapes
        points.events.data.connect(self._on_prompts)
        shapes.events.data.connect(self._on_boxes)
        image.events.contrast_limits.connect(self.schedule)
        image.events.data.connect(self._on_data)
        self.viewer.layers.selection.active = points
        points.mode = "add"
        self.schedule()

    # ---- the run loop ----------------------------------------------------------------
    def schedule(self, _event=None) -> None:
        """Something changed: invalidate running jobs and run again.

        The first change after a quiet spell runs at once (on the next turn of the event loop);
        changes that follow quickly, or arrive while a job is out, wait for the quiet time.
        """
        self.generation += 1
        if self.closed:
            return
        self._debounce.poke(busy=self._running > 0)

    def run(self) -> None:
        """Read the current plane's prompts and start a job (or clear the preview)."""
        self._debounce.ran()
        lay, encoder = self.layers, self.encoder
        if lay is None or encoder is None:
            if lay is not None and (len(lay.points.data) or len(lay.shapes.data)):
                self._say(NO_MODEL_FOR_CLICKS)  # the prompts stay and run once one is loaded
            return
        try:
            index = layers.current_index(self.viewer, lay.image)
            clicks, labels, _ = prompts.read_clicks(lay.points, lay.image, index)
            drawing = {len(lay.shapes.data) - 1} if self._drawing else ()
            boxes, _, other = prompts.read_boxes(lay.shapes, lay.image, index, skip=drawing)
        except Sam3OnnxError as exc:
            self._clear_preview()
            if len(lay.points.data) or len(lay.shapes.data):
                self._say(str(exc))
            return
        if other:
            self._say(f"{other} non-rectangle shape(s) on this plane are ignored; draw rectangles.")
        objects = group_objects(clicks, labels, boxes)
        if index != self._index:
            self._last.clear()
            self._index = index
        ref = layers.slice_ref(lay.image, index, self.data_version(lay.image))
        if not objects:
            self._clear_preview()
            self._prefetch(self.view.ref(self.viewer, lay.image, ref, []))  # before a click
            return
        ref = self.view.ref(self.viewer, lay.image, ref, [o.prompt for o in objects])
        job = click_flow.Job(self.generation, ref, [(o.key, with_feedback(o, self._last))
                                                 for o in objects], self.view.tiling)
        self._start(encoder, job, self.texts, lay.image, index)

    def _start(self, encoder, job: click_flow.Job, texts, image, index) -> None:
        encoding = click_flow.will_encode(encoder, job)
        if encoding:
            self._encoding += 1
            self._cancelled = False  # waiting again
            self.busy(True, f"Encoding {layers.index_label(image, index)} of '{image.name}' "
                            "(once per plane)...")
        self._running += 1
        workers.start(click_flow.run_job, encoder, job, texts,
                      on_result=lambda result: self._apply(cast(click_flow.JobResult, result)),
                      on_error=self._failed, on_finish=lambda: self._finished(encoding))

    def _apply(self, result: click_flow.JobResult) -> None:
        lay = self.layers
        if result.job.generation != self.generation or lay is None or lay.image not in (
            self.viewer.layers
        ) or result.job.ref.source != layers.image_source(lay.image):
            return  # the user moved on: never write a stale result
        for message in result.problems:
            self._say(message)
        index = result.job.ref.index
        self._applied = self.generation
        if not any(mask.present for _, _, mask in result.masks) and result.masks:
            self._say("The model finds no object at these prompts."
                      + contrast_hint(result.job.ref, [p for _, p, _ in result.masks]))
        self._last = {key: (prompt, mask) for key, prompt, mask in result.masks}
        self._current = [mask for _, _, mask in result.masks if mask.present]
        if lay.preview not in self.viewer.layers:
            self._shown = None
        preview = layers.restore_labels(self.viewer, lay, "preview")
        commit.show_preview(preview, index, [m.mask for m in self._current], self._shown)
        self._shown = tuple(index)
        self._prefetch(result.job.ref)

    def _failed(self, exc: BaseException) -> None:
        self._say(workers.describe(exc))

    def _finished(self, encoded: bool) -> None:
        self._running -= 1
        if encoded:
            self._encoding -= 1
            if self._encoding == 0 and not self._cancelled:
                self.busy(False, "Plane encoded: further prompts on it are answered at once.")
            if self._encoding == 0:
                self._cancelled = False

    def cancel(self) -> None:
        """Stop waiting for the encode in progress: the preview it was for is dropped.

        The user's encode is not stopped (only encode ahead's are): it runs to its end in its
        worker and its embedding is cached, so prompting that plane later is immediate.
        """
        if self._encoding == 0:
            return
        self.generation += 1  # the result, when it comes, is stale
        self._cancelled = True
        self.busy(False, "")
        self._say("Encoding cancelled: this plane's preview is dropped. The encode finishes in "
                  "the background and is kept, so prompting this plane again is quick.",
                  warn=False)

    # ---- what the Text and Propagate tabs share --------------------------------------
    def data_version(self, image: Image) -> int:
        """Counter bumped whenever ``image``'s data changes (it is part of the cache key)."""
        return self.workspace.versions.get(image.unique_id)

    def previewed(self, index: tuple[int, ...]) -> list[tuple[Prompt, ObjectMask]] | None:
        """``(prompt, result)`` of each present object previewed on plane ``index``.

        Empty when the preview shows another plane or nothing; None when a newer prompt's
        result was dropped or is still on its way (the preview is stale).
        """
        if tuple(index) != self._shown:
            return []
        found = [(prompt, mask) for prompt, mask in self._last.values() if mask.present]
        if found and self._applied != self.generation:
            return None
        return found

    @property
    def pending(self) -> bool:
        """Whether a run is scheduled or a job is still out (tests wait for this)."""
        return self._debounce.active or self._running > 0

    def _prefetch(self, ref: SliceRef) -> None:
        """Tell encode ahead (:mod:`.ahead`) where the user is: it plans what to encode."""
        if self.layers is not None and self.ahead is not None:
            self.ahead(ref, self.layers.image)

    # ---- actions ---------------------------------------------------------------------
    def commit(self) -> list[int]:
        """Write the previewed object(s) into the target layer; clear the plane's prompts."""
        lay = self.layers
        if lay is None or not self._current or self._shown is None:
            self._say("There is no object to commit: click on an object or draw a box first.")
            return []
        if self._applied != self.generation:
            self._say("The preview is still being updated; commit again when it shows.")
            return []
        if layers.is_scratch(lay.target) or layers.same(lay.target, lay.preview):
            self._say(f"'{lay.target.name}' is the plugin's scratch layer; choose another "
                      "'Commit to' layer.")
            return []
        if lay.target not in self.viewer.layers:
            self._say(f"The target layer was removed; writing into a new '{layers.OBJECTS_NAME}'.")
        layers.restore_labels(self.viewer, lay, "target")
        try:
            ids = commit.commit_masks(lay.target, self._shown, [m.mask for m in self._current],
                                      self.overwrite, commit.click_entry(self))
        except Sam3OnnxError as exc:
            self._say(str(exc))
            return []
        self._committed_to = lay.target
        self._say(f"Committed object id(s) {', '.join(map(str, ids))} to '{lay.target.name}' "
                  "(Ctrl+Z undoes it).", warn=False)
        self.clear()
        return ids

    def undo(self, redo: bool = False) -> None:
        """Undo (or redo) the last commit in its Labels layer, from wherever the user is."""
        self._say(*commit.undo_last(self._committed_to, self.viewer, redo))

    def clear(self) -> None:
        """Drop the current plane's prompts and the preview."""
        lay = self.layers
        if lay is None:
            return
        try:
            index = layers.current_index(self.viewer, lay.image)
            point_rows = prompts.plane_rows(lay.points, lay.image, index)
            shape_rows = prompts.plane_rows(lay.shapes, lay.image, index)  # ellipses too
        except Sam3OnnxError as exc:
            self._say(str(exc))
            return
        for layer, rows in ((lay.points, point_rows), (lay.shapes, shape_rows)):
            if len(rows):
                layer.selected_data = set(int(r) for r in rows)
                layer.remove_selected()
        self._forget()

    # ---- events ----------------------------------------------------------------------
    def _on_prompts(self, event=None) -> None:
        """A Points data event: run on finished changes only (:data:`prompts.IN_PROGRESS`)."""
        if prompts.change_action(event) not in prompts.IN_PROGRESS:
            self.schedule()

    def _on_boxes(self, event=None) -> None:
        """A Shapes data event; a rectangle "adding" is being drawn: not a prompt yet."""
        self._drawing = prompts.change_action(event) == "adding"
        self._on_prompts(event)

    def _on_step(self, _event=None) -> None:
        if self.layers is None:
            return
        try:
            index = layers.current_index(self.viewer, self.layers.image)
        except Sam3OnnxError:
            index = None
        if index != self._index:
            self._forget()
            self.schedule()

    def _on_data(self, _event=None) -> None:
        if self.layers is None:
            return
        key = self.layers.image.unique_id
        self.workspace.versions.bump(key)
        source = layers.image_source(self.layers.image)
        self.workspace.cache.drop(lambda k: k.source == source)
        self.schedule()

    def _on_removed(self, event) -> None:
        lay = self.layers
        if lay is None:
            return
        if layers.same(event.value, lay.image):
            self._disconnect()
            self.layers = None
            self.generation += 1
            source = layers.image_source(event.value)
            self.workspace.cache.drop(lambda k: k.source == source)
            removal.say_unless_closing(self._say, lambda: self.closed,
                                       removal.image_removed(event.value.name))
        elif event.value in (lay.points, lay.shapes):
            removal.say_unless_closing(self._say, lambda: self.closed,
                                       removal.prompt_layer_removed(event.value.name))

    # ---- helpers ---------------------------------------------------------------------
    def _clear_preview(self) -> None:
        self._current = []
        if self.layers is not None and self.layers.preview in self.viewer.layers:
            commit.clear_preview(self.layers.preview, self._shown)
        self._shown = None

    def _forget(self) -> None:
        self.generation += 1
        self._last.clear()
        self._index = None
        self._clear_preview()

    def _disconnect(self) -> None:
        lay = self.layers
        if lay is None:
            return
        lay.points.events.data.disconnect(self._on_prompts)
        lay.shapes.events.data.disconnect(self._on_boxes)
        lay.image.events.contrast_limits.disconnect(self.schedule)
        lay.image.events.data.disconnect(self._on_data)

    def _say(self, message: str, warn: bool = True) -> None:
        """A message: ``warn`` (a warning, an error, a hint) pops up; routine news does not."""
        self.messages = [*self.messages[-49:], message]
        (self.notify if warn else self.inform)(message)

    def close(self) -> None:
        """Stop listening to the viewer; safe twice, in any order, at interpreter exit."""
        self.closed = True
        self.generation += 1  # results still on their way are dropped
        self._debounce.stop()  # safe when Qt already deleted its timer
        hooks = [(self.viewer.dims.events.current_step, self._on_step),
                 (self.viewer.dims.events.ndisplay, self._on_step),
                 (self.viewer.layers.events.removed, self._on_removed)]
        try:
            self._disconnect()
        except (RuntimeError, AttributeError):
            pass
        for emitter, callback in hooks:
            emitter.disconnect(callback)
        self.layers = None
