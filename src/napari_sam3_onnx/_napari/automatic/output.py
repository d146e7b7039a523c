"""Where an automatic run goes: a preview layer while it runs, then one undoable commit.

Finished planes are shown in a scratch Labels layer ("SAM automatic (preview)") as they arrive,
with a features table (the instance table's columns: label, score = predicted IoU, stability,
area_px, plane index, box), so hovering an object shows its numbers. Commit writes every
previewed plane into the target (a new "SAM automatic" layer or the user's Labels layer) as one
undo step through the one labels writer, only onto background pixels and with ids above the
layer's largest: one undo removes the whole run and nothing of the user's is overwritten.
Discard removes the preview. A new run while the preview is still there reuses that layer (emptied,
its shape updated in place): adding a layer costs the Qt thread 0.2-0.6 s (its controls, its
visual, removing the old one, and under software OpenGL the first draw's shader build), which
froze the window at every Preview click.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from napari.layers import Image, Labels

from napari_sam3_onnx._napari import features
from napari_sam3_onnx._napari.features import append_features
from napari_sam3_onnx._napari.labels_writer import write_planes
from napari_sam3_onnx._napari.layers import plane_shape, transform_kwargs
from napari_sam3_onnx._napari.pacing import TABLE_EVERY_S, Every
from napari_sam3_onnx.engine.automatic import AutoInstance, AutoMaskSettings, AutoResult

PREVIEW = "SAM automatic (preview)"
RESULT = "SAM automatic"


def feature_rows(instances: Sequence[AutoInstance], image: Image) -> pd.DataFrame:
    """The instance table's rows (kind ``"automatic"``) for objects found in ``image``."""
    return features.feature_rows(instances, "automatic", len(plane_shape(image)) - 2)


def reusable(layer: Labels, image: Image, viewer) -> bool:
    """Whether ``layer`` (a previous preview) can show a run on ``image`` once emptied.

    It must still be in ``viewer`` and have the image's plane dimensionality and
    data-to-world transform (its shape is then set in place by assigning new data).
    """
    if layer not in viewer.layers or layer.ndim != len(plane_shape(image)):
        return False
    want = transform_kwargs(image)
    have = transform_kwargs(layer)
    return all(np.array_equal(np.asarray(want[k]), np.asarray(have[k]))
               for k in ("scale", "translate", "rotate", "shear", "affine", "units"))


class AutoOutput:
    """The preview of one run and its commit.

    Parameters
    ----------
    viewer : napari.Viewer
        Gets the preview layer.
    image : napari.layers.Image
        The segmented image (the layers take its shape and transform).
    reuse : napari.layers.Labels, optional
        The previous run's preview: emptied and used again when it is still in the viewer and
        can take the image's transform (:func:`reusable`); otherwise it is removed and a new
        preview is added.
    """

    def __init__(self, viewer, image: Image, reuse: Labels | None = None) -> None:
        self.viewer, self.image = viewer, image
        self.planes: list[tuple[tuple[int, ...], AutoResult]] = []
        self._unlisted: list[AutoInstance] = []  # shown, not yet in the features table
        self._table = Every(TABLE_EVERY_S)  # the table's updates while the run goes on
        shape = plane_shape(image)
        if reuse is not None and reusable(reuse, image, viewer):
            self.preview = reuse
            reuse.data = np.zeros(shape, np.int32)  # lazily zeroed pages: no 3-D memset
        else:
            if reuse is not None and reuse in viewer.layers:
                viewer.layers.remove(reuse)
            self.preview = viewer.add_labels(np.zeros(shape, np.int32), name=PREVIEW,
                                             opacity=0.6, **transform_kwargs(image))
        self.preview.features = feature_rows([], image)
        self.kept = ""  # what other objects kept at the commit (the writer's note)

    @property
    def alive(self) -> bool:
        """Whether the preview layer is still in the viewer."""
        return self.preview in self.viewer.layers

    @property
    def objects(self) -> int:
        """Distinct ids previewed (a 3-D object counts once)."""
        return len({i.id for _, r in self.planes for i in r.instances})

    def add(self, index: tuple[int, ...], result: AutoResult, refresh: bool = True) -> bool:
        """Show one finished plane; False if the preview layer was removed meanwhile.

        ``refresh=False`` leaves the redraw to the caller (one per batch of planes).
        """
        if not self.alive:
            return False
        self.planes.append((tuple(index), result))
        self.preview.data[tuple(index)] = result.labels
        self._unlisted += result.instances
        if refresh:
            self.refresh()
        return True

    def refresh(self, redraw: bool = True, final: bool = True) -> None:
        """List the planes added since the table's last update (one update) and redraw.

        ``redraw=False``: no slice on screen changed. ``final=False`` (a batch while the run
        goes on): the table is updated at most once per :data:`~.pacing.TABLE_EVERY_S`.
        """
        if not self.alive:
            return
        if self._unlisted and (final or self._table.due()):
            append_features(self.preview, feature_rows(self._unlisted, self.image))
            self._unlisted = []
        if redraw:
            self.preview.refresh()

    def discard(self) -> None:
        """Drop the preview layer and what it holds."""
        if self.alive:
            self.viewer.layers.remove(self.preview)
        self.planes = []

    def commit(self, target: Labels | None,
               entry: Mapping | None = None) -> tuple[Labels, int]:
        """Write the previewed planes into ``target`` (None: a new layer) as one undo step.

        Returns
        -------
        (napari.layers.Labels, int)
            The layer written to and the number of distinct ids written.
        """
        if target is None:
            target = self.viewer.add_labels(np.zeros(plane_shape(self.image), np.int32),
                                            name=RESULT, **transform_kwargs(self.image))
            target.features = feature_rows([], self.image)
        data = target.data
        shift = int(np.max(data)) if data.size else 0
        done = write_planes(target, [(index, np.where(r.labels > 0, r.labels + shift, 0), None)
                                     for index, r in self.planes], entry=entry)
        self.kept = done.note()
        written = [AutoInstance(i.id + shift, i.score, i.stability, done.count(index, i.id + shift),
                                i.index, i.box_rc)
                   for index, r in self.planes for i in r.instances
                   if done.count(index, i.id + shift) > 0]
        if written:
            append_features(target, feature_rows(written, self.image))
        target.refresh()
        self.discard()
        return target, len({i.id for i in written})


def nothing_found(settings: AutoMaskSettings, planes: int, hint: str = "") -> str:
    """Why an automatic run kept no mask, and which settings to try.

    Parameters
    ----------
    settings : AutoMaskSettings
        The run's settings (the message names the filters and their values).
    planes : int
        Slices segmented.
    hint : str
        Appended (e.g. :func:`~napari_sam3_onnx._napari.hints.contrast_hint`).
    """
    n = settings.points_per_side
    return (f"No object found on {planes} slice(s): none of the {n} x {n} grid clicks gave a "
            f"mask the model rates above the quality cut ({settings.pred_iou_thresh:g}) and "
            f"the stability cut ({settings.stability_score_thresh:g}). Try lower cuts under "
            "Settings (stability first), or a denser grid for small objects. Nothing to "
            f"commit.{hint}")
