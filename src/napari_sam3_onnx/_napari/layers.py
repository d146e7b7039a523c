"""The widget's layers and the napari half of the one coordinate path.

napari world coordinates -> the image layer's data coordinates (``layer.world_to_data``, so scale,
translate, rotation, shear and affine are honoured) -> the plane index (the non-displayed axes)
and ``(row, col)`` on the plane. From there :mod:`napari_sam3_onnx.engine.coords` takes over.

Only the 2-D view of the image's last two axes is supported: other views raise
:class:`ViewError` with a message for the user.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from napari.layers import Image, Labels, Layer, Points, Shapes

from napari_sam3_onnx.engine.encoding import SliceRef, refs_along_axis
from napari_sam3_onnx.models.errors import Sam3OnnxError

PROMPTS_NAME = "SAM prompts"
BOXES_NAME = "SAM boxes"
PREVIEW_NAME = "SAM preview"
OBJECTS_NAME = "SAM objects"
#: ``layer.metadata`` key naming the image (``unique_id``) and role a prompt layer serves.
OWNER_KEY = "napari_sam3_onnx_image"
#: ``layer.metadata`` key of an image layer showing data read before the layer existed (the
#: next image of a series, encoded ahead): ``{"source": ..., "layer": str(unique_id)}``.
SOURCE_KEY = "napari_sam3_onnx_source"

#: Points feature holding each click's polarity.
FEATURE = "positive"
POSITIVE_COLOR = "lime"
NEGATIVE_COLOR = "magenta"
POSITIVE_SYMBOL = "disc"
NEGATIVE_SYMBOL = "cross"
#: Click markers never draw smaller than this many screen pixels, however far one zooms out.
MIN_MARKER_PX = 6
#: Colours of previewed objects 1, 2, ... (committed objects use napari's random label colours).
PREVIEW_COLORS = ("gold", "springgreen", "deepskyblue", "orchid", "tomato")
#: Names of a stack's leading axes by how many there are (a plane has none).
LEAD_AXIS_NAMES: dict[int, tuple[str, ...]] = {1: ("z",), 2: ("t", "z")}

#: The layer type :func:`find_or_add` is asked for, and returns.
L = TypeVar("L", bound=Layer)


class ViewError(Sam3OnnxError):
    """The viewer shows the image in a way prompts cannot be read from (3-D, transposed, ...)."""


@dataclass
class PromptLayers:
    """The layers one image is annotated with.

    Attributes
    ----------
    image : napari.layers.Image
        The image being segmented.
    points : napari.layers.Points
        Positive / negative clicks (feature ``positive``).
    shapes : napari.layers.Shapes
        Rectangles (box prompts).
    preview : napari.layers.Labels
        The current object(s) before commit (uint8, values 1..K).
    target : napari.layers.Labels
        Where committed objects are written.
    """

    image: Image
    points: Points
    shapes: Shapes
    preview: Labels
    target: Labels


def plane_shape(image: Image) -> tuple[int, ...]:
    """Shape of the image's data without the RGB channel axis (level 0 if multiscale)."""
    shape = tuple(int(s) for s in base_data(image).shape)
    return shape[:-1] if image.rgb else shape


def base_data(image: Image):
    """The full-resolution array of an image layer."""
    return image.data[0] if image.multiscale else image.data


def transform_kwargs(image: Layer) -> dict:
    """Keyword arguments that give a new layer the data-to-world transform of ``image``."""
    return {
        "scale": tuple(image.scale),
        "translate": tuple(image.translate),
        "rotate": np.asarray(image.rotate),
        "shear": np.asarray(image.shear),
        "affine": np.asarray(image.affine.affine_matrix),
        "units": tuple(str(u) for u in image.units),
    }


def _owner(layer: Layer) -> str | None:
    return layer.metadata.get(OWNER_KEY)


def unwrap(obj):
    """The object itself behind napari's plugin proxy (``PublicOnlyProxy``), else ``obj``.

    napari hands a plugin widget a wrapped viewer; every layer read through it is a new
    wrapper, so ``a is b`` is False for the same layer. Compare layers with :func:`same`.
    """
    return getattr(obj, "__wrapped__", obj)


def same(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same layer (or both None), wrapped or not."""
    return unwrap(a) is unwrap(b)


def is_scratch(layer: Layer) -> bool:
    """Whether ``layer`` is a preview layer of this plugin (of any image): never a target."""
    return str(_owner(layer) or "").endswith(f"/{PREVIEW_NAME}")


def find_or_add(viewer, cls: type[L], name: str, image: Image, **kwargs) -> L:
    """Reuse the image's layer of this role, or add a new one with the image's transform.

    A layer is reused when it was made for this image (tagged in ``metadata``), or when it is
    an untagged layer called ``name`` of the right type and dimensions (and shape, for Labels).
    A new layer is called ``name``, or ``"name (image name)"`` if ``name`` is taken.
    """
    shape = plane_shape(image)
    tag = f"{image.unique_id}/{name}"  # which image, which role
    for layer in viewer.layers:
        fits = isinstance(layer, cls) and layer.ndim == len(shape) and (
            cls is not Labels or tuple(layer.data.shape) == shape)
        if fits and (_owner(layer) == tag or (_owner(layer) is None and layer.name == name)):
            layer.metadata = {**layer.metadata, OWNER_KEY: tag}
            for key, value in transform_kwargs(image).items():
                setattr(layer, key, value)
            return layer
    if any(layer.name == name for layer in viewer.layers):
        name = f"{name} ({image.name})"
    common = {"name": name, "metadata": {OWNER_KEY: tag}, **transform_kwargs(image)}
    if cls is Labels:
        dtype = kwargs.pop("dtype", np.int32)
        # np.zeros is lazily committed by the OS: untouched planes cost no memory.
        return viewer.add_labels(np.zeros(shape, dtype), **common, **kwargs)
    if cls is Points:
        return viewer.add_points(np.empty((0, len(shape))), ndim=len(shape), **common, **kwargs)
    return viewer.add_shapes(None, ndim=len(shape), **common, **kwargs)


def style_points(points: Points) -> None:
    """Give a Points layer the polarity feature, colours by polarity and positive defaults."""
    if FEATURE not in points.features:
        points.features = {FEATURE: np.ones(len(points.data), bool)}
    points.face_color_cycle = {True: POSITIVE_COLOR, False: NEGATIVE_COLOR}
    points.face_color = FEATURE
    points.border_color = "white"
    set_polarity(points, True)


def set_polarity(points: Points, positive: bool) -> None:
    """Make the next clicks positive or negative (feature, colour and symbol).

    The points already placed keep their polarity and their symbol: napari gives the selected
    points (the click just added is selected) the new current symbol, so the selection is
    cleared first.
    """
    defaults = points.feature_defaults
    defaults[FEATURE] = bool(positive)
    points.feature_defaults = defaults
    if len(points.selected_data):
        points.selected_data = set()
    points.current_symbol = POSITIVE_SYMBOL if positive else NEGATIVE_SYMBOL


def polarity(points: Points) -> bool:
    """Whether the next click is positive."""
    if FEATURE not in points.feature_defaults:
        return True
    return bool(np.asarray(points.feature_defaults[FEATURE])[0])


def preview_colormap():
    """Fixed bright colours for previewed objects (1..K), so they read apart from committed ones."""
    from napari.utils.colormaps import DirectLabelColormap

    colours = {k: c for k, c in enumerate(PREVIEW_COLORS, start=1)}
    return DirectLabelColormap(color_dict={None: PREVIEW_COLORS[0], 0: "transparent", **colours})


def marker_size(image: Image) -> float:
    """A click marker's diameter in the image's data pixels: 1/64 of the plane's longer side.

    napari sizes points in data units, so a fixed size is a dot on a large image and a blob
    on a small one; this gives 8-12 screen pixels at the initial zoom (the plane fitted to a
    canvas of 500-800 pixels), whatever the image's size. :data:`MIN_MARKER_PX` bounds it
    when zoomed out.
    """
    return max(1.0, max(plane_shape(image)[-2:]) / 64)


def make_prompt_layers(viewer, image: Image, target: Labels | None = None) -> PromptLayers:
    """Find or create the image's prompt, box, preview and (unless given) target layers."""
    points = find_or_add(viewer, Points, PROMPTS_NAME, image, size=marker_size(image),
                         canvas_size_limits=(MIN_MARKER_PX, 10000))
    style_points(points)
    shapes = find_or_add(viewer, Shapes, BOXES_NAME, image, face_color="transparent",
                         edge_color="yellow", edge_width=2)
    preview = find_or_add(viewer, Labels, PREVIEW_NAME, image, dtype="uint8", opacity=0.6,
                          colormap=preview_colormap())
    if target is None:
        target = find_or_add(viewer, Labels, OBJECTS_NAME, image)
    return PromptLayers(image, points, shapes, preview, target)


def remove_unused(viewer, lay: PromptLayers) -> list[str]:
    """Remove the layers the widget made for ``lay.image`` that hold nothing of the user's.

    Empty prompt and box layers and the preview (scratch) go; the target goes only if the
    widget made it and nothing was ever written into it. A layer the user made, or one holding
    clicks, rectangles or labels, stays. Returns the names removed.
    """
    tag = f"{lay.image.unique_id}/"
    removed = []
    for layer in (lay.points, lay.shapes, lay.preview, lay.target):
        ours = str(_owner(layer) or "").startswith(tag)
        if not ours or layer not in viewer.layers:
            continue
        empty = is_scratch(layer) or (
            not np.any(np.asarray(layer.data)) if isinstance(layer, Labels)
            else len(layer.data) == 0)
        if empty:
            removed.append(layer.name)
            viewer.layers.remove(layer)
    return removed


def restore_labels(viewer, lay: PromptLayers, which: str) -> Labels:
    """Put back the preview or target layer if the user deleted it; returns the live layer."""
    layer = getattr(lay, which)
    if layer not in viewer.layers:
        name, dtype = (PREVIEW_NAME, "uint8") if which == "preview" else (OBJECTS_NAME, "int32")
        layer = find_or_add(viewer, Labels, name, lay.image, dtype=dtype)
        setattr(lay, which, layer)
    return layer


def check_view(viewer, image: Image) -> None:
    """Raise :class:`ViewError` unless the viewer shows the image's last two axes in 2-D."""
    dims = viewer.dims
    if dims.ndisplay != 2:
        raise ViewError("Prompts work in the 2-D view only; switch the viewer back to 2-D.")
    if image.ndim < 2 or tuple(dims.displayed) != (dims.ndim - 2, dims.ndim - 1):
        raise ViewError(
            "Prompts need the image's last two axes on screen (rows and columns); the viewer "
            "shows other axes. Reset the axis order (the 'transpose' button) to prompt."
        )


def current_index(viewer, image: Image) -> tuple[int, ...]:
    """Index of the plane the viewer shows, one int per non-displayed axis of the image.

    Raises
    ------
    ViewError
        The view is not the 2-D view of the last two axes, or the viewer's position lies
        outside the image's extent along a non-displayed axis.
    """
    check_view(viewer, image)
    lead = image.ndim - 2
    if lead == 0:
        return ()
    data_point = np.asarray(image.world_to_data(viewer.dims.point), dtype=np.float64)
    index = np.round(data_point[:lead]).astype(int)
    sizes = plane_shape(image)[:lead]
    if np.any(index < 0) or np.any(index >= np.asarray(sizes)):
        raise ViewError(f"The viewer shows no plane of '{image.name}' here; move the slider.")
    return tuple(int(i) for i in index)


def layer_to_image_data(layer: Layer, coords: np.ndarray, image: Image) -> np.ndarray:
    """Map ``(N, ndim)`` data coordinates of ``layer`` to the image's data coordinates.

    Goes through world coordinates, so a prompt layer with another transform still lands on
    the right pixels.
    """
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, layer.ndim)
    if layer.ndim != image.ndim:
        raise ViewError(
            f"'{layer.name}' has {layer.ndim} dimensions but '{image.name}' has {image.ndim}; "
            "use prompt layers created for this image."
        )
    if len(coords) == 0:
        return np.empty((0, image.ndim))
    return np.stack(
        [np.asarray(image.world_to_data(layer.data_to_world(c)), np.float64) for c in coords]
    )


def on_plane(coords: np.ndarray, index: tuple[int, ...]) -> np.ndarray:
    """``(N,)`` bool: which image-data coordinates lie on the plane ``index`` (rounded)."""
    coords = np.asarray(coords, dtype=np.float64)
    if len(index) == 0 or len(coords) == 0:
        return np.ones(len(coords), bool)
    lead = np.round(coords[:, : len(index)]).astype(int)
    return np.all(lead == np.asarray(index, int), axis=1)


def contrast_window(image: Image) -> tuple[float, float] | None:
    """The window the model sees the image through: none for uint8 RGB, else the display's."""
    return window_of(base_data(image), bool(image.rgb), image.contrast_limits)


def window_of(data, rgb: bool, limits) -> tuple[float, float] | None:
    """The window the model sees ``data`` shown with contrast ``limits`` through.

    None for uint8 RGB (the colours as they are), else the limits as floats.
    """
    if rgb and np.dtype(data.dtype) == np.uint8:
        return None
    lo, hi = limits
    return float(lo), float(hi)


def image_source(image: Image) -> Hashable:
    """What names ``image``'s planes in cache keys (``SliceRef.source``).

    The layer's ``unique_id``; or, for a layer made to show data read ahead of it (see
    :func:`set_source`), that read's name, so what was encoded before the layer existed is
    found. A copy of such a layer (napari's Duplicate copies the metadata) has another
    ``unique_id`` and is named by it: its data may change apart from the original's.
    """
    tag = image.metadata.get(SOURCE_KEY)
    if isinstance(tag, dict) and tag.get("layer") == str(image.unique_id):
        return tag["source"]
    return image.unique_id


def set_source(image: Image, source: Hashable) -> None:
    """Name ``image``'s planes ``source`` in cache keys (data read before the layer existed)."""
    image.metadata[SOURCE_KEY] = {"source": source, "layer": str(image.unique_id)}


def slice_ref(image: Image, index: tuple[int, ...], data_version: Hashable) -> SliceRef:
    """The engine's reference to one plane of an image layer."""
    return SliceRef(
        data=base_data(image),
        index=tuple(index),
        rgb=bool(image.rgb),
        window=contrast_window(image),
        source=image_source(image),
        data_version=data_version,
    )


def refs_along(image: Image, axis: int, fixed: tuple[int, ...],
               data_version: Hashable) -> list[SliceRef]:
    """The planes of an image layer along leading ``axis``, the others at ``fixed``.

    The engine's one refs builder with the layer's data, window and identity, so the references
    share the keys :func:`slice_ref` gives the same planes.
    """
    return refs_along_axis(base_data(image), axis, fixed, bool(image.rgb),
                           contrast_window(image), image_source(image), data_version)


def index_label(image: Image, index: tuple[int, ...]) -> str:
    """A short human label for a plane, e.g. ``"z=3"`` or ``"t=1, z=3"``."""
    if not index:
        return "the image"
    names = LEAD_AXIS_NAMES.get(len(index)) or tuple(f"axis{i}" for i in range(len(index)))
    return ", ".join(f"{n}={i}" for n, i in zip(names, index, strict=True))
