"""SAM 3's temporal encoding of object pointers, from whatever a bundle provides.

In upstream SAM 3 a pointer ``p`` frames away from the current one gets the position embedding
``obj_ptr_tpos_proj(sine_pe(p / (max_ptrs - 1), C))`` (a Linear ``C -> C_m``, C = 256, C_m = 64),
repeated for the ``C / C_m`` memory tokens the pointer is split into
(docs/layouts.md#tracked-slices). Exports that take pointer offsets as a graph input
(nso, pagarcia) compute it inside memory attention; exports that take
``pointer_memory_position_embeddings`` (jax-image-tools) leave it to the caller. The caller then
needs the projection, which a bundle may ship:

* in its constants: a ``[C_m, C]`` weight and ``[C_m]`` bias under one of
  :data:`WEIGHT_KEYS` / :data:`BIAS_KEYS`, or an object ``{"weight": .., "bias": ..}`` under one of
  :data:`OBJECT_KEYS` (a ``[C, C_m]`` weight is accepted transposed);
* as a small graph :data:`GRAPH_FILE` taking normalised offsets ``[P]`` and returning ``[P, C_m]``.

Without either the encoding is zeros (what EdgeTAM, which has no pointer encoding, is fed) and
:attr:`PointerEncoding.source` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import LayoutMismatchError
from ..graph_info import read_signature
from ..runtime import LazySession, RuntimeConfig
from ._concepts import as_declared

WEIGHT_KEYS = ("obj_ptr_tpos_proj.weight", "obj_ptr_tpos_proj_weight", "obj_ptr_tpos_proj_w",
               "pointer_tpos_proj.weight", "pointer_tpos_proj_weight")
BIAS_KEYS = ("obj_ptr_tpos_proj.bias", "obj_ptr_tpos_proj_bias", "obj_ptr_tpos_proj_b",
             "pointer_tpos_proj.bias", "pointer_tpos_proj_bias")
OBJECT_KEYS = ("obj_ptr_tpos_proj", "pointer_tpos_proj")
GRAPH_FILE = "pointer_tpos.onnx"
#: What :attr:`PointerEncoding.source` says when the bundle provides nothing.
ZEROS = f"no obj_ptr_tpos_proj in the constants, no {GRAPH_FILE}"


def sine_pe(positions: np.ndarray, dim: int, temperature: float = 10000.0) -> np.ndarray:
    """Upstream's ``get_1d_sine_pe``: ``(P,)`` positions -> ``(P, dim)`` float32.

    ``[sin(x / w_i), cos(x / w_i)]`` with ``w_i = temperature ** (2 * (i // 2) / (dim / 2))``,
    ``i = 0 .. dim / 2 - 1``.
    """
    half = dim // 2
    i = np.arange(half, dtype=np.float64)
    w = temperature ** (2 * (i // 2) / half)
    x = np.asarray(positions, np.float64).reshape(-1, 1) / w
    return np.concatenate([np.sin(x), np.cos(x)], axis=1).astype(np.float32)


@dataclass
class PointerEncoding:
    """Turns normalised pointer offsets into per-pointer position embeddings.

    Attributes
    ----------
    source : str
        Where the projection came from (a constants key, the graph file, or :data:`ZEROS`).
    weight, bias : numpy.ndarray or None
        ``(C_m, C)`` and ``(C_m,)`` float32 when read from constants.
    session : LazySession or None
        The :data:`GRAPH_FILE` graph when the bundle ships it.
    """

    source: str
    mem_dim: int
    pointer_dim: int
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    session: LazySession | None = None

    @property
    def is_zeros(self) -> bool:
        """True when the bundle provides no encoding (zeros are fed)."""
        return self.weight is None and self.session is None

    def encode(self, normalised: np.ndarray) -> np.ndarray:
        """``(P,)`` offsets already divided by ``max_ptrs - 1`` -> ``(P, C_m)`` float32."""
        x = np.asarray(normalised, np.float32).reshape(-1)
        if self.weight is not None:
            pe = sine_pe(x, self.pointer_dim)
            return (pe @ self.weight.T + self.bias).astype(np.float32)
        if self.session is not None and len(x):
            sig = self.session.signature
            info = sig.inputs[0]
            out = self.session.run([sig.outputs[0].name], {info.name: as_declared(x, info)})
            return np.asarray(out[sig.outputs[0].name], np.float32).reshape(len(x), self.mem_dim)
        return np.zeros((len(x), self.mem_dim), np.float32)

    def tokens(self, normalised: np.ndarray) -> np.ndarray:
        """``(P * C / C_m, 1, C_m)``: each pointer's embedding repeated for its tokens."""
        per = self.encode(normalised)
        return np.repeat(per, self.pointer_dim // self.mem_dim, axis=0)[:, None, :]

    def close(self) -> None:
        """Close the graph session, if any."""
        if self.session is not None:
            self.session.close()


def _pair(consts: Mapping[str, object]) -> tuple[str, object, object] | None:
    for key in OBJECT_KEYS:
        obj = consts.get(key)
        if isinstance(obj, Mapping) and "weight" in obj and "bias" in obj:
            return f"{key}.{{weight,bias}}", obj["weight"], obj["bias"]
    wkey = next((k for k in WEIGHT_KEYS if k in consts), None)
    bkey = next((k for k in BIAS_KEYS if k in consts), None)
    if wkey is not None and bkey is not None:
        return f"{wkey} / {bkey}", consts[wkey], consts[bkey]
    return None


def find_pointer_encoding(
    consts: Mapping[str, object], folder: Path, constants_name: str, mem_dim: int,
    pointer_dim: int, config: RuntimeConfig, layout: str,
) -> PointerEncoding:
    """The pointer encoding a bundle provides (constants first, then :data:`GRAPH_FILE`).

    Raises
    ------
    LayoutMismatchError
        The projection found has the wrong shape for ``C_m`` x ``C``.
    """
    found = _pair(consts)
    if found is not None:
        where, w, b = found
        weight = np.asarray(w, np.float32)
        bias = np.asarray(b, np.float32).reshape(-1)
        if weight.shape == (pointer_dim, mem_dim) and pointer_dim != mem_dim:
            weight = weight.T  # stored as (in, out)
        if weight.shape != (mem_dim, pointer_dim) or bias.shape != (mem_dim,):
            raise LayoutMismatchError(
                layout, constants_name, f"{where} has shapes {list(np.asarray(w).shape)} and "
                f"{list(np.asarray(b).shape)}; expected [{mem_dim}, {pointer_dim}] and [{mem_dim}]")
        return PointerEncoding(f"{constants_name}: {where}", mem_dim, pointer_dim, weight, bias)
    graph = folder / GRAPH_FILE
    if graph.is_file():
        sig = read_signature(graph)
        if len(sig.inputs) != 1 or not sig.outputs:
            raise LayoutMismatchError(layout, graph.name, "expected one input (normalised "
                                      f"offsets [P]) and a [P, {mem_dim}] output; it has "
                                      f"{sig.describe()}")
        return PointerEncoding(GRAPH_FILE, mem_dim, pointer_dim,
                               session=LazySession(graph, config))
    return PointerEncoding(ZEROS, mem_dim, pointer_dim)
