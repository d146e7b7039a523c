"""Helpers shared by the concept-detector adapters (wkentaro, samexporter, Autognosi, ComicApp).

Facts used here (docs/layouts.md#text-tokens, #exemplar-boxes): tokens are CLIP BPE ids with start
49406 and end 49407 in a 32-long context; upstream-style ``tokens`` inputs are padded with 0 and the
graph derives its own mask (True = pad), HF-style ``input_ids`` are padded with 49407 and come with
an ``attention_mask`` int64 (1 = token). Exemplar boxes are ``cx, cy, w, h`` normalised to [0, 1],
one per slot, labels 1 positive / 0 negative, and an unused slot is disabled by its mask (True =
padding), never by a "full" box.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo

SOT, EOT = 49406, 49407

NUMPY_DTYPES = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64, "uint8": np.uint8,
    "int8": np.int8, "int32": np.int32, "int64": np.int64, "bool": np.bool_,
}


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function, float32."""
    x = np.asarray(x, dtype=np.float32)
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


def cxcywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """``(N, 4)`` ``(cx, cy, w, h)`` -> ``(N, 4)`` float32 ``(x0, y0, x1, y1)``."""
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    half = b[:, 2:] / 2
    return np.concatenate([b[:, :2] - half, b[:, :2] + half], axis=1)


def as_declared(value: np.ndarray | float | int, info: TensorInfo) -> np.ndarray:
    """Cast ``value`` to the declared dtype of ``info`` and give it the declared rank.

    An array of the declared rank is kept; otherwise it is reshaped (element order kept) to the
    declared shape with at most one dynamic dim; a scalar becomes rank 0 or ``[1]`` as declared.
    """
    dtype = NUMPY_DTYPES.get(info.dtype)
    if dtype is None:
        raise ValueError(f"input {info.name} has an unsupported dtype {info.dtype}")
    arr: np.ndarray = np.asarray(value).astype(dtype)
    if info.rank == 0:
        return arr.reshape(())
    shape = [d if isinstance(d, int) and d > 0 else -1 for d in info.shape]
    if arr.ndim == info.rank and all(s in (-1, a) for s, a in zip(shape, arr.shape, strict=True)):
        return arr
    if shape.count(-1) <= 1 and arr.size:
        try:
            return arr.reshape(shape)
        except ValueError:
            pass
    raise ValueError(
        f"cannot give an array of shape {arr.shape} the declared shape {info.shape} of "
        f"input {info.name}"
    )


def token_feed(token_ids: Sequence[int], context: int, pad: int) -> np.ndarray:
    """``(1, context)`` int64 token ids padded with ``pad``.

    Raises
    ------
    ValueError
        The prompt is empty or longer than the context (start and end tokens included).
    """
    ids = [int(t) for t in token_ids]
    if len(ids) == 0:
        raise ValueError("The text prompt is empty; type a word or phrase to search for.")
    if len(ids) > context:
        raise ValueError(
            f"The text prompt is too long: {len(ids)} tokens (with start/end tokens) but the "
            f"language encoder takes at most {context}. Use a shorter phrase."
        )
    feed = np.full((1, context), pad, dtype=np.int64)
    feed[0, : len(ids)] = ids
    return feed


def exemplar_slots(
    boxes_cxcywh: np.ndarray | None,
    box_labels: np.ndarray | None,
    slots: int | None,
    layout: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill a detector's exemplar slots.

    Parameters
    ----------
    boxes_cxcywh : numpy.ndarray or None
        ``(n, 4)`` ``(cx, cy, w, h)`` normalised to [0, 1].
    box_labels : numpy.ndarray or None
        ``(n,)`` 1/True positive, 0/False negative (default: all positive).
    slots : int or None
        The graph's slot count K; None for a dynamic count (then ``max(n, 1)`` rows are sent).
    layout : str
        For messages.

    Returns
    -------
    coords, labels, padding : numpy.ndarray
        ``(K, 4)`` float32, ``(K,)`` int64, ``(K,)`` bool (True = unused slot). Unused slots hold
        coordinates 0 and label 1, as the exporters' own runtimes send them.

    Raises
    ------
    ValueError
        More boxes than slots, a malformed array, or a degenerate box (zero width or height).
    """
    b = np.zeros((0, 4), np.float32) if boxes_cxcywh is None else np.asarray(
        boxes_cxcywh, dtype=np.float32)
    if b.ndim != 2 or b.shape[1] != 4:
        raise ValueError(f"exemplar boxes must be an (n, 4) cx, cy, w, h array, got {b.shape}")
    n = b.shape[0]
    lab = np.ones(n, np.int64) if box_labels is None else np.asarray(box_labels).astype(np.int64)
    if lab.reshape(-1).shape[0] != n:
        raise ValueError(f"got {n} exemplar boxes but {lab.size} labels")
    if n and (not np.isfinite(b).all() or (b[:, 2:] <= 0).any()):
        raise ValueError(
            "An exemplar box has no area (zero or negative width/height) or is not finite; "
            "draw the box again."
        )
    if slots is not None and n > slots:
        raise ValueError(
            f"The {layout} detector takes at most {slots} exemplar box"
            f"{'es' if slots != 1 else ''} (its graph has {slots} slot"
            f"{'s' if slots != 1 else ''}), but {n} were given. Remove some boxes."
        )
    k = slots if slots is not None else max(n, 1)
    coords = np.zeros((k, 4), np.float32)
    labels = np.ones(k, np.int64)
    padding = np.ones(k, np.bool_)
    coords[:n], labels[:n], padding[:n] = b, lab.reshape(-1), False
    return coords, labels, padding


def slot_count(info: TensorInfo, axis: int) -> int | None:
    """The fixed slot count on ``axis`` of a slot input, None if dynamic."""
    dim = info.shape[axis] if info.rank > axis else None
    return dim if isinstance(dim, int) and dim > 0 else None


def find_graph(
    graphs: Mapping[str, GraphSignature],
    inputs: Iterable[str] = (),
    outputs: Iterable[str] = (),
    exclude: Iterable[GraphSignature] = (),
) -> GraphSignature | None:
    """The first graph (by file name) declaring all ``inputs`` and ``outputs``."""
    ins, outs, skip = set(inputs), set(outputs), {g.path for g in exclude}
    for name in sorted(graphs):
        g = graphs[name]
        if g.path not in skip and ins <= g.input_names and outs <= g.output_names:
            return g
    return None


def missing_graphs(
    layout: str, anchor: GraphSignature, roles: Mapping[str, GraphSignature | None],
    wanted: Mapping[str, str], graphs: Mapping[str, GraphSignature],
) -> None:
    """Raise :class:`LayoutMismatchError` naming every role in ``roles`` that is None.

    ``wanted`` describes each role (what the graph takes and returns), so the message says what
    to look for; the graphs that were found are listed too.
    """
    missing = [role for role, g in roles.items() if g is None]
    if not missing:
        return
    needs = "; ".join(f"{role} ({wanted[role]})" for role in missing)
    found = ", ".join(sorted(graphs)) or "nothing else"
    raise LayoutMismatchError(
        layout, anchor.path.name,
        f"it belongs to a bundle that also needs: {needs}. Found in the folder: {found}",
    )
