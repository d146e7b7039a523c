"""Small helpers shared by the tracker-head adapters (pagarcia, jax-video).

Prompt ordering, decoder choice, pairing an exporter's file variants, tensor layout conversions
and input feeds shaped as a graph declares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature, TensorInfo
from ..imageops import resize_bilinear

T = TypeVar("T")


def order_prompt(points_xy: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(N, 2)`` float32 points and ``(N,)`` int64 labels with box corners (2, 3) first.

    The relative order within box corners and within clicks is kept; padding points (label -1)
    are dropped (the graphs pad themselves, or the adapter adds SAM's empty prompt).
    """
    pts = np.asarray(points_xy, np.float32).reshape(-1, 2)
    labs = np.asarray(labels, np.int64).reshape(-1)
    if len(pts) != len(labs):
        raise ValueError(f"{len(pts)} points but {len(labs)} labels")
    keep = labs != -1
    pts, labs = pts[keep], labs[keep]
    order = np.argsort(~np.isin(labs, (2, 3)), kind="stable")
    return pts[order], labs[order]


def candidate_count(sig: GraphSignature, *names: str, axis: int = 1) -> int | None:
    """Number of mask candidates a decoder returns, read from the first fixed dim found."""
    for name in names:
        if name in sig.output_names:
            shape = sig.output(name).shape
            dim = shape[axis] if -len(shape) <= axis < len(shape) else None
            if isinstance(dim, int) and dim > 0:
                return dim
    return None


def pick_decoder(n_points: int, multi: T | None, single: T | None) -> T:
    """SAM's rule: several masks for <= 1 prompt point (a box is two), one mask otherwise.

    At least one of ``multi`` and ``single`` is given (an adapter has one decoder or more).
    """
    first, second = (multi, single) if n_points <= 1 else (single, multi)
    chosen = first if first is not None else second
    if chosen is None:
        raise ValueError("no prompt decoder graph to choose from")
    return chosen


def variant_token(path_stem: str, base: str) -> str | None:
    """The exporter's variant suffix of a file stem (``memory_attention_single`` -> ``_single``)."""
    return path_stem[len(base):] if path_stem.startswith(base) else None


def prefer_variant(
    graphs: Sequence[GraphSignature], base: str, token: str | None
) -> GraphSignature:
    """Among equivalent graphs (at least one), the one of the same export variant.

    Without one of that variant, the first by file name.
    """
    ordered = sorted(graphs, key=lambda g: g.path.name)
    for g in ordered:
        if token is not None and variant_token(g.path.stem, base) == token:
            return g
    return ordered[0]


def mask_for_memory(mask_logits: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(1, 1, H, W)`` float32 logits at the memory encoder's mask size.

    ``mask_logits`` is ``(h, w)`` (or with leading singleton axes) covering the whole model input;
    it is resized bilinearly (``align_corners=False``, as SAM upsamples its low-res masks).
    """
    m = np.asarray(mask_logits, np.float32)
    m = m.reshape(m.shape[-2:])
    if m.shape != tuple(size):
        m = resize_bilinear(m, size, antialias=False)
    return np.ascontiguousarray(m[None, None], dtype=np.float32)


def nchw_to_tokens(x: np.ndarray) -> np.ndarray:
    """``(1, C, h, w)`` -> ``(h*w, 1, C)`` token-major, row-major over ``(y, x)``."""
    c = x.shape[1]
    return np.ascontiguousarray(x.reshape(c, -1).T[:, None, :], dtype=np.float32)


def tokens_to_nchw(t: np.ndarray, channels: int, grid: tuple[int, int]) -> np.ndarray:
    """Any ``(..., h*w, C)`` token array -> ``(1, C, h, w)`` float32."""
    flat = np.asarray(t, np.float32).reshape(-1, channels)
    return np.ascontiguousarray(flat.T.reshape(1, channels, *grid))


def feed_like(info: TensorInfo, value: float | bool) -> np.ndarray:
    """``value`` in the shape (dynamic dims -> 1) and dtype an input declares (e.g. a flag)."""
    shape = [d if isinstance(d, int) else 1 for d in info.shape]
    return np.full(shape, value).astype(np.dtype(info.dtype))


def check_names(sig: GraphSignature, layout: str, inputs: Sequence[str], outputs: Sequence[str],
                optional: Sequence[str] = ()) -> None:
    """Raise naming missing inputs/outputs and inputs an adapter would not know to feed."""
    parts = []
    for what, want, have in (("inputs", inputs, sig.input_names),
                             ("outputs", outputs, sig.output_names)):
        if missing := sorted(set(want) - have):
            parts.append(f"missing {what} {missing}")
    if extra := sorted(sig.input_names - set(inputs) - set(optional)):
        parts.append(f"unexpected inputs {extra}")
    if parts:
        parts.append(f"it has ({', '.join(sorted(sig.input_names))}) -> "
                     f"({', '.join(sorted(sig.output_names))})")
        raise LayoutMismatchError(layout, sig.path.name, "; ".join(parts))


class Closable(Protocol):
    """A session (or anything holding one) that can release it."""

    def close(self) -> None:
        """Release it."""
        ...


def close_all(*sessions: Closable | None) -> None:
    """Close every session that is not None."""
    for s in sessions:
        if s is not None:
            s.close()
