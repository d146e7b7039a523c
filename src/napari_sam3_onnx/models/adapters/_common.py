"""Helpers shared by the layout adapters: reading geometry from graphs, encoder feeds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..base import Embedding
from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo
from ..imageops import resize_rgb_uint8
from ..runtime import LazySession

#: SAM 3 normalisation: x / 255, then (x - 0.5) / 0.5 (not ImageNet statistics).
SAM3_MEAN = 0.5
SAM3_STD = 0.5


def fixed_dim(info: TensorInfo, axis: int, layout: str, graph: str) -> int:
    """A dimension that must be fixed in the graph (e.g. the input size); clear error if not."""
    dim = info.shape[axis]
    if not isinstance(dim, int) or dim <= 0:
        raise LayoutMismatchError(
            layout, graph, f"{info.name} has a dynamic dimension {axis} ({dim!r}); "
            "a fixed size is needed to know the geometry"
        )
    return dim


def spatial_size(info: TensorInfo, layout: str, graph: str) -> tuple[int, int]:
    """``(height, width)`` = the last two dims of an image-like tensor."""
    return fixed_dim(info, -2, layout, graph), fixed_dim(info, -1, layout, graph)


def require_names(
    sig: GraphSignature, layout: str, inputs: Iterable[str] = (), outputs: Iterable[str] = ()
) -> None:
    """Raise :class:`LayoutMismatchError` naming whatever input/output is missing."""
    missing_in = sorted(set(inputs) - sig.input_names)
    missing_out = sorted(set(outputs) - sig.output_names)
    if missing_in or missing_out:
        parts = []
        if missing_in:
            parts.append(f"missing inputs {missing_in}")
        if missing_out:
            parts.append(f"missing outputs {missing_out}")
        raise LayoutMismatchError(layout, sig.path.name, "; ".join(parts))


def encoder_feed(rgb: np.ndarray, info: TensorInfo, layout: str, graph: str) -> np.ndarray:
    """Turn an RGB image into what an encoder input declares.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``(rows, cols, 3)`` uint8.
    info : TensorInfo
        The encoder's image input. Rank 3 uint8 (``[3, S, S]``): normalisation is inside the
        graph. Rank 4 float (``[1, 3, S, S]``): the caller normalises with mean = std = 0.5;
        float16 inputs get float16.

    Returns
    -------
    numpy.ndarray
        The feed, resized (bilinear, stretched) to the graph's input size.
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(
            f"expected an (rows, cols, 3) uint8 RGB image, got {rgb.shape} {rgb.dtype}"
        )
    size = spatial_size(info, layout, graph)
    resized = resize_rgb_uint8(rgb, size)
    chw = np.ascontiguousarray(resized.transpose(2, 0, 1))
    if info.rank == 3 and info.dtype == "uint8":
        return chw
    if info.rank == 4 and info.dtype in ("float32", "float16"):
        x = chw.astype(np.float32)  # normalised in place: the same values, no extra copies
        x /= 255.0
        x -= SAM3_MEAN
        x /= SAM3_STD
        return x[None] if info.dtype == "float32" else x[None].astype(np.float16)
    raise LayoutMismatchError(
        layout, graph, f"unexpected encoder input {info.name}: {info.dtype} rank {info.rank}"
    )


def as_float32(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cast float16 outputs to float32 (the engine works in float32)."""
    return {
        k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in arrays.items()
    }


def encode_image(
    session: LazySession, info: TensorInfo, layout: str, rgb: np.ndarray, outputs: Sequence[str]
) -> Embedding:
    """Feed an RGB image to an encoder graph and keep the requested outputs as an Embedding.

    Parameters
    ----------
    session, info
        The encoder and its image input (rank 3 uint8 or rank 4 float, see :func:`encoder_feed`).
    layout : str
        The layout's name, for error messages.
    rgb : numpy.ndarray
        ``(rows, cols, 3)`` uint8.
    outputs : Sequence[str]
        The encoder outputs the layout's prompt graphs consume (float16 ones become float32).
    """
    graph = session.path.name
    out = as_float32(session.run(outputs, {info.name: encoder_feed(rgb, info, layout, graph)}))
    size = spatial_size(info, layout, graph)
    return Embedding(out, size, (int(rgb.shape[0]), int(rgb.shape[1])))
