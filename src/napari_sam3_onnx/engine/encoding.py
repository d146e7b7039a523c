"""Encode each slice once: slice extraction + contrast mapping + adapter + embedding cache."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from napari_sam3_onnx.engine.cache import EmbeddingCache, SliceKey
from napari_sam3_onnx.engine.slices import extract_plane, plane_to_rgb
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.models.preempt import CancelToken, preemptible


@dataclass(frozen=True)
class SliceRef:
    """Which plane of which image, seen through which window.

    Attributes
    ----------
    data : array-like
        ``(..., rows, cols[, channels])`` image data (numpy, dask, zarr).
    index : tuple[int, ...]
        Indices of the leading axes (``()`` for 2-D data).
    rgb : bool
        The last axis holds colour channels.
    window : tuple[float, float] or None
        Contrast limits mapped to 0..255 (None: uint8 data as is / min-max for other dtypes).
    source : Hashable
        Identity of the image for the cache (a layer id, a file path).
    data_version : Hashable
        Changes when the data changes.
    region : tuple[int, int, int, int] or None
        ``(r0, c0, r1, c1)`` half-open rectangle of the plane (a tile or the field of view) that
        is encoded instead of the whole plane; None for the whole plane. It is part of the cache
        key, so each tile is encoded once.
    """

    data: object
    index: tuple[int, ...]
    rgb: bool = False
    window: tuple[float, float] | None = None
    source: Hashable = None
    data_version: Hashable = 0
    region: tuple[int, int, int, int] | None = None

    @property
    def plane_shape(self) -> tuple[int, int]:
        """``(rows, cols)`` of the whole plane (whatever the region)."""
        shape = self.data.shape  # type: ignore[attr-defined]
        return (shape[-3], shape[-2]) if self.rgb else (shape[-2], shape[-1])

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, cols)`` of what is encoded: the region, or the whole plane."""
        if self.region is None:
            return self.plane_shape
        r0, c0, r1, c1 = self.region
        return (r1 - r0, c1 - c0)


def lead_index(axis: int, fixed: Sequence[int], k: int) -> tuple[int, ...]:
    """The leading index of position ``k`` along leading ``axis``, the other axes at ``fixed``."""
    index = [int(i) for i in fixed]
    index.insert(int(axis), int(k))
    return tuple(index)


def refs_along_axis(
    data, axis: int = 0, fixed: Sequence[int] = (), rgb: bool = False,
    window: tuple[float, float] | None = None, source: Hashable = None,
    data_version: Hashable = 0,
) -> list[SliceRef]:
    """One :class:`SliceRef` per position along a leading axis of ``data``: the one refs builder.

    Every workflow that walks a stack (propagation, tracked segmentation, the dock's tabs, the
    headless API) names its planes with this function.

    Parameters
    ----------
    data : array-like
        ``(..., rows, cols[, channels])`` image data (numpy, dask, zarr; read lazily).
    axis : int
        The leading axis to walk (0 for ``(Z, rows, cols)``).
    fixed : sequence of int
        Indices of the other leading axes, in order (e.g. the time point of a
        ``(T, Z, rows, cols)`` stack walked along z: ``axis=1, fixed=(t,)``).
    rgb, window, source, data_version
        As in :class:`SliceRef` (``source`` None: the data's ``id``).

    Returns
    -------
    list of SliceRef
        ``data.shape[axis]`` references, in order; ``ref.index`` is the full leading index.

    Raises
    ------
    PromptError
        ``data`` has no leading axis (a 2-D image), or ``axis`` / ``fixed`` do not fit.

    Examples
    --------
    >>> stack = np.zeros((5, 40, 60), np.uint16)           # (z, rows, cols)
    >>> [r.index for r in refs_along_axis(stack, window=(0, 3000))]
    [(0,), (1,), (2,), (3,), (4,)]
    >>> tzyx = np.zeros((2, 5, 40, 60), np.uint16)
    >>> refs_along_axis(tzyx, axis=1, fixed=(1,))[3].index   # t = 1, z = 3
    (1, 3)
    """
    lead = data.ndim - (3 if rgb else 2)
    if lead < 1 or not 0 <= axis < lead or len(fixed) != lead - 1:
        raise PromptError(f"Data of shape {tuple(data.shape)} has {max(lead, 0)} leading "
                          f"axes: choose an axis in 0..{lead - 1} and give {lead - 1} fixed "
                          "indices." if lead >= 1 else
                          f"Data of shape {tuple(data.shape)} is one plane: no axis to walk.")
    source = source if source is not None else id(data)
    return [SliceRef(data, lead_index(axis, fixed, k), rgb, window, source, data_version)
            for k in range(int(data.shape[axis]))]


#: ``on_start(ref)`` just before a plane that is not cached is encoded.
EncodeStart = Callable[[SliceRef], None]
#: ``on_end(ref, error)`` right after (``error`` None on success).
EncodeEnd = Callable[[SliceRef, BaseException | None], None]


class SliceEncoder:
    """Encodes planes through one adapter and keeps their embeddings in a cache.

    Thread-safe: several threads may ask for planes at once; the cache makes each plane's
    encode single-flight (a second request for a plane being encoded waits for it). Listeners
    (:meth:`listen`) hear every encode start and end, in the thread that encodes (a GUI hands
    them on to its own thread).

    Parameters
    ----------
    adapter : SamAdapter
        The opened bundle.
    cache : EmbeddingCache, optional
        Shared cache (the widget shares one across click, text and propagation work).
    model_id : Hashable
        Identity of the bundle in cache keys (e.g. its folder and precision).
    """

    def __init__(
        self, adapter: SamAdapter, cache: EmbeddingCache | None = None, model_id: Hashable = None
    ) -> None:
        self.adapter = adapter
        self.cache = cache if cache is not None else EmbeddingCache()
        self.model_id = model_id if model_id is not None else id(adapter)
        self.encoder_calls = 0
        self._lock = threading.Lock()
        self._per_thread = threading.local()
        self._listeners: list[tuple[EncodeStart | None, EncodeEnd | None]] = []

    def listen(
        self, on_start: EncodeStart | None = None, on_end: EncodeEnd | None = None
    ) -> Callable[[], None]:
        """Call ``on_start(ref)`` / ``on_end(ref, error)`` around every encode of a plane.

        Only planes that are not cached are reported (for a store-backed encoder, a store read
        as well as an encode). Returns a function that removes these listeners.
        """
        pair = (on_start, on_end)
        with self._lock:
            self._listeners.append(pair)

        def remove() -> None:
            with self._lock:
                if pair in self._listeners:
                    self._listeners.remove(pair)

        return remove

    def key(self, ref: SliceRef, need: Capability | None = None) -> SliceKey:
        """The cache key of a plane for the workflow ``need`` (None: the default encoder).

        A bundle with one image encoder per precision (a per-workflow bundle) adds the
        encoder that serves ``need`` (:meth:`variant`), so a plane used by two workflows of
        different precisions has two keys and two embeddings.
        """
        window = None if ref.window is None else (float(ref.window[0]), float(ref.window[1]))
        region = None if ref.region is None else tuple(int(v) for v in ref.region)
        variant = self.variant(need)
        model = self.model_id if variant is None else (self.model_id, variant)
        return SliceKey(ref.source, ref.data_version, tuple(ref.index), window, model, region)

    def variant(self, need: Capability | None) -> str | None:
        """The image encoder that serves ``need`` (None: the bundle's default one)."""
        which = getattr(self.adapter, "encoder_variant", None)  # stand-ins may lack it
        return None if which is None else which(need)

    def cached(self, ref: SliceRef, need: Capability | None = None) -> Embedding | None:
        """The plane's embedding for ``need`` if it is cached (no encoding)."""
        return self.cache.get(self.key(ref, need))

    def rgb(self, ref: SliceRef) -> np.ndarray:
        """The ``(rows, cols, 3)`` uint8 image the model sees for this plane (or its region)."""
        plane = extract_plane(ref.data, ref.index, ref.rgb, ref.region)
        return plane_to_rgb(plane, ref.window, ref.rgb)

    def embed(self, ref: SliceRef, need: Capability | None = None,
              cancel: CancelToken | None = None) -> Embedding:
        """The plane's embedding, encoding it only if it is not cached.

        With ``need`` (the workflow: :attr:`Capability.TEXT`, :attr:`Capability.CLICKS`, ...) a
        bundle with one image encoder per workflow (Autognosi) encodes only that one; a cached
        embedding made for another workflow is completed with the missing encoder and cached
        again. Without it, everything is encoded.

        With ``cancel``, ``cancel.cancel()`` from another thread stops the encode
        (:mod:`~napari_sam3_onnx.models.preempt`): this call raises
        :class:`~napari_sam3_onnx.models.preempt.Preempted` and nothing is cached or stored
        (callers waiting for the same plane encode it themselves).
        """
        with preemptible(cancel) if cancel is not None else nullcontext():
            return self._embed(ref, need)

    def _embed(self, ref: SliceRef, need: Capability | None) -> Embedding:
        key = self.key(ref, need)
        emb = self.cache.get_or_compute(key, lambda: self._reported(ref, need))
        if need is not None and self.adapter.lacks(emb, need):
            emb = self.adapter.complete(emb, self.rgb(ref), need)
            self._count_encode()
            self.cache.put(key, emb)
        return emb

    def embed_many(self, refs: Sequence[SliceRef]) -> list[Embedding]:
        """Embeddings of several planes, in order (cached ones are not re-encoded)."""
        return [self.embed(r) for r in refs]

    def _reported(self, ref: SliceRef, need: Capability | None = None) -> Embedding:
        """:meth:`_encode` with the listeners told before and after."""
        with self._lock:
            listeners = list(self._listeners)
        for on_start, _ in listeners:
            if on_start is not None:
                on_start(ref)
        error: BaseException | None = None
        try:
            return self._encode(ref, need)
        except BaseException as exc:
            error = exc
            raise
        finally:
            for _, on_end in listeners:
                if on_end is not None:
                    on_end(ref, error)

    def _encode(self, ref: SliceRef, need: Capability | None = None) -> Embedding:
        rgb = self.rgb(ref)
        emb = self.adapter.encode(rgb) if need is None else self.adapter.encode_for(rgb, need)
        self._count_encode()
        return emb

    def _count_encode(self) -> None:
        """One encoder run: counted for every user and for the calling thread."""
        with self._lock:
            self.encoder_calls += 1
        self._per_thread.calls = self.thread_encoder_calls() + 1

    def thread_encoder_calls(self) -> int:
        """Encoder runs made by the calling thread.

        One run's own encodes when other tabs share this encoder and its cache: a plane that
        another thread encoded is not counted.
        """
        return getattr(self._per_thread, "calls", 0)
