"""Moving through an image series in the viewer: save, swap the image layer, load labels back.

The image shown is one Image layer the navigator adds (tagged :data:`SERIES_KEY`) and selects
in the dock's image chooser, so every tab works on it. Moving on saves the labels of the dock's
target layer when it holds any (through :class:`~napari_sam3_onnx.api.series.ImageSeries`,
asking ``confirm(path)`` before replacing a file the series did not save), adds the next image
as a new layer, selects it, and only then removes the previous image and the layers the dock
made for it. A new layer has a new ``unique_id``: the embedding cache keys on it, so the previous
image's embeddings are never served for the next one (they are dropped with its layer). Labels
of an image already done are loaded into its target layer when the user returns to it.

The next image is read ahead (:meth:`SeriesNavigator.ahead`, for encode ahead, in its thread):
when the user moves to it, the layer shows that very read, named by its
:class:`~napari_sam3_onnx.api.series_ahead.SeriesSource` in cache keys
(:func:`~napari_sam3_onnx._napari.layers.set_source`) and with the contrast limits it was
encoded with, so its first preview finds the embedding made ahead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from napari.layers import Image, Labels
from napari.layers.utils.layer_utils import calc_data_range
from qtpy.QtCore import QTimer

from napari_sam3_onnx._napari.host import DockHost
from napari_sam3_onnx._napari.layers import (
    OBJECTS_NAME,
    OWNER_KEY,
    is_scratch,
    same,
    set_source,
    window_of,
)
from napari_sam3_onnx.api.io import InputError
from napari_sam3_onnx.api.series import ImageSeries
from napari_sam3_onnx.api.series_ahead import ImageRead, ReadAhead, SeriesSource
from napari_sam3_onnx.engine.encode_ahead import Pending
from napari_sam3_onnx.engine.encoding import SliceRef

#: ``layer.metadata`` key of the series image layer: the item's key.
SERIES_KEY = "napari_sam3_onnx_series_item"


def shown_limits(data: np.ndarray, rgb: bool) -> tuple[float, float]:
    """The contrast limits napari gives a new layer of ``data`` (its data range)."""
    lo, hi = calc_data_range(data, rgb=rgb)
    return float(lo), float(hi)


class SeriesNavigator:
    """The series open in one dock, and its current image in the viewer.

    Parameters
    ----------
    host : DockHost
        The dock: its viewer, image chooser, click session and messages.
    confirm : callable
        ``confirm(path) -> bool``: may ``path`` (not saved by this series) be replaced?
    changed : callable, optional
        Called after the position or the done marks change (the panel redraws).
    """

    def __init__(self, host: DockHost, confirm: Callable[[Path], bool],
                 changed: Callable[[], None] | None = None) -> None:
        self.host = host
        self.confirm = confirm
        self.changed = changed or (lambda: None)
        self.series: ImageSeries | None = None
        self.layer: Image | None = None
        self._loaded: np.ndarray | None = None  # labels loaded back, to skip unchanged saves
        self._saved_layer = None  # the Labels layer whose data save_current put on disk
        #: The next image read ahead (its unshown reads' embeddings dropped from the cache).
        self.reads = ReadAhead(shown_limits, self._forget)

    # ---- reading ahead ---------------------------------------------------------------
    def ahead(self, count: int) -> list[Pending]:
        """The next image as a :class:`Pending` plane, for encode ahead (cheap, Qt thread).

        Its ``resolve`` reads the image (in encode ahead's thread) through :attr:`reads`, so
        the read is the one :meth:`next` shows. At most one image, whatever ``count``.
        """
        series, lay = self.series, self.host.session.layers
        if (series is None or count < 1 or self.layer is None or lay is None
                or not same(lay.image, self.layer)):
            return []  # the user works on another image than the series'

        index = series.position + 1
        if index >= len(series):
            return []
        item = series.items[index]

        def resolve() -> SliceRef | None:
            try:
                got = self.reads.read(series, index)
            except (InputError, OSError, ValueError):
                return None  # said when the user gets there
            return ahead_ref(got)

        return [Pending((item.key, "series next"), resolve)]

    def _forget(self, source: SeriesSource) -> None:
        self.host.session.workspace.cache.drop(lambda key: key.source == source)

    # ---- opening and moving -----------------------------------------------------------
    def open(self, source: Path | str, out: Path | str | None = None,
             labels_format: str = "tif") -> ImageSeries | None:
        """Open a series (see :meth:`ImageSeries.open`) and show its first unfinished image.

        The image shown before is saved first (if it is a series image with labels); a refusal
        is said and nothing changes.
        """
        if self.series is not None and not self.save_current():
            return None
        folder = self.host.model.bundle_folder
        try:
            series = ImageSeries.open(source, out, labels_format,
                                      protected=[folder] if folder is not None else [])
        except (InputError, OSError) as exc:
            self.host.notify(f"Cannot open the series: {exc}")
            return None
        self.series = series
        self._show(series.position)
        return series

    def go(self, index: int) -> bool:
        """Save the current image's labels, then show image ``index`` (False: did not move)."""
        if self.series is None or not 0 <= index < len(self.series):
            return False
        if index == self.series.position and self.layer is not None:
            return True  # already shown
        if not self.save_current():
            return False
        return self._show(index)

    def next(self, _viewer=None) -> bool:
        """The next image (the Next button and ``PageDown``); on the last one, save it."""
        if self.series is not None and self.series.position == len(self.series) - 1:
            self.save_current()
            return False
        return self.series is not None and self.go(self.series.position + 1)

    def previous(self, _viewer=None) -> bool:
        """The previous image (the Previous button and ``PageUp``)."""
        return self.series is not None and self.go(self.series.position - 1)

    # ---- saving ----------------------------------------------------------------------
    def current_labels(self) -> np.ndarray | None:
        """The data of :meth:`current_target`, or None."""
        target = self.current_target()
        return None if target is None else np.asarray(target.data)

    def current_target(self) -> Labels | None:
        """The Labels layer of the current series image, or None.

        The dock's target layer while the dock annotates that image; else (the user chose
        another image, or removed this one) the target layer the dock made for it.
        """
        if self.layer is None:
            return None
        lay, layers = self.host.session.layers, self.host.viewer.layers
        if lay is not None and same(lay.image, self.layer) and lay.target in layers:
            return lay.target
        made = [la for la in self._made_for(self.layer) if isinstance(la, Labels)
                and not is_scratch(la) and la.name.startswith(OBJECTS_NAME)]
        return made[0] if made else None

    def save_current(self) -> bool:
        """Save the current image's labels if it has any (False: refused or failed; stay)."""
        series, target = self.series, self.current_target()
        self._saved_layer = target
        labels = None if target is None else np.asarray(target.data)
        if series is None or labels is None or not labels.any():
            return True
        index = series.position
        if (self._loaded is not None and series.is_done(index)
                and np.array_equal(labels, self._loaded)):
            return True  # unchanged since it was loaded: nothing to write
        overwrite = False
        if series.needs_confirmation(index):
            if not self.confirm(series.target(index)):
                self._saved_layer = None
                self.host.notify(f"Not saved: {series.target(index)} exists. Choose another "
                                 "output folder, or confirm replacing it.")
                return False
            overwrite = True
        try:
            path = series.save(index, labels, overwrite=overwrite)
        except (InputError, OSError) as exc:
            self._saved_layer = None
            self.host.notify(f"Labels of {series.items[index].name} not saved: {exc}")
            return False
        self._loaded = labels.copy()
        self.host.inform(f"Saved the labels of {series.items[index].name}: {path}")
        self.changed()
        return True

    # ---- the layers ------------------------------------------------------------------
    def _show(self, index: int) -> bool:
        series = self.series
        if series is None:
            return False
        item = series.items[index]
        got = self.reads.take(series, index)  # the next image, read (and encoded) ahead
        try:
            data = series.read(index) if got is None else got.data
            saved = series.load_labels(index)
        except (InputError, OSError, ValueError) as exc:
            # the position moves anyway, with no image shown, so Next / Previous get past it
            if self.layer is not None:
                self._remove(self.layer)
            self.layer, self._loaded, series.position = None, None, index
            message = f"Cannot show {item.name}: {exc} Next / Previous go on."
            # after the dock's own news of the removed layer (said at the loop's next turn)
            QTimer.singleShot(0, lambda: self._say(message))
            self.changed()
            return False
        viewer, old = self.host.viewer, self.layer
        if old is not None:  # the next image's target takes the plain name
            for la in self._made_for(old):
                if la.name == OBJECTS_NAME:
                    la.name = f"{OBJECTS_NAME} ({old.name})"
        if got is None:
            layer = viewer.add_image(data, name=item.name, rgb=data.ndim == 3,
                                     metadata={SERIES_KEY: item.key})
        else:  # named as encode ahead named it, shown through the window it encoded with
            layer = Image(data, name=item.name, rgb=got.rgb, contrast_limits=got.limits,
                          metadata={SERIES_KEY: item.key})
            set_source(layer, got.source)
            viewer.add_layer(layer)
        self.layer = layer
        series.position = index
        self._select(layer)
        if old is not None:
            self._remove(old)
        self._loaded = None
        lay = self.host.session.layers
        if lay is not None and same(lay.image, layer):
            if saved is not None:
                lay.target.data = saved.astype(lay.target.data.dtype)  # the layer's own copy:
                self._loaded = saved  # painting in place must not change what was loaded
            viewer.layers.selection.active = lay.points
        viewer.reset_view()
        self.changed()
        return True

    def _say(self, message: str) -> None:
        """``notify`` from a timer: the dock may be gone by then (never raise in a Qt slot)."""
        try:
            self.host.notify(message)
        except RuntimeError:
            pass

    def _select(self, layer: Image) -> None:
        """Make ``layer`` the dock's image (the chooser lists it once the viewer added it)."""
        combo = self.host.image
        for i in range(combo.count()):
            if same(combo.itemData(i), layer):
                combo.setCurrentIndex(i)
                return

    def _remove(self, old: Image) -> None:
        """Remove a series image and every layer the dock made for it (labels saved before)."""
        viewer = self.host.viewer
        made = self._made_for(old)
        if old in viewer.layers:
            viewer.layers.remove(old)
        for la in made:  # labels not just saved stay (a second target of the user's)
            unsaved = (isinstance(la, Labels) and not is_scratch(la)
                       and not same(la, self._saved_layer) and np.asarray(la.data).any())
            if la in viewer.layers and not unsaved:
                viewer.layers.remove(la)

    def _made_for(self, image: Image) -> list:
        """The layers the dock made for ``image`` (tagged with its ``unique_id``)."""
        tag = f"{image.unique_id}/"
        return [la for la in self.host.viewer.layers
                if str(la.metadata.get(OWNER_KEY) or "").startswith(tag)]

    def close(self) -> None:
        """Forget the series (the layers stay for the user)."""
        self.series, self.layer, self._loaded = None, None, None
        self.reads.drop()


def ahead_ref(got: ImageRead) -> SliceRef:
    """The plane encode ahead encodes for an image read ahead: the key its layer will give.

    The layer that shows it (:meth:`SeriesNavigator._show`) has ``got.source`` as its source,
    ``got.limits`` as its contrast limits and data version 0 (a new layer), so
    :func:`~napari_sam3_onnx._napari.layers.slice_ref` of its plane gives this same key.
    """
    return SliceRef(got.data, (), got.rgb, window_of(got.data, got.rgb, got.limits),
                    got.source, 0)
