"""Find a plane's stored embedding whatever the image is called in the store.

``napari-sam3-onnx precompute`` names each image after its file (``stack`` for ``stack.tif``,
see :func:`~napari_sam3_onnx.api.io.image_names`) and maps planes through ``--window`` (or,
without it, uint8 as is / each plane's own min..max). A viewer knows neither: its layer may
have been renamed, and its window is the display's contrast limits. So an entry is looked up
by **what the model would see**, not by name alone:

* the image name is only a first guess; the store's other images are then tried at the same
  plane index (and tile), and an entry is taken only when its data fingerprint (a digest of
  the plane's values, :func:`~.store_keys.fingerprint`) and the bundle's identity match;
* the window is compared by its effect: an entry made through another window is used when
  that window turns this plane into exactly the same uint8 image (``(0, 255)`` on uint8 data
  is the same as no window; limits equal to the plane's own min and max are the same as
  none on other dtypes).

Anything else is a miss and is encoded, so a stored embedding of other data or another
contrast is never served. New embeddings are written under the name the image was found by
(else the guessed one), but never over an entry of other data: what ``precompute`` stored
is not replaced from a viewer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import replace
from pathlib import Path

import numpy as np

from napari_sam3_onnx.engine.cache import EmbeddingCache
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.slices import extract_plane, plane_to_rgb
from napari_sam3_onnx.engine.store.embedding_store import (
    BundleTag,
    EmbeddingStore,
    EntryKey,
    EntryStatus,
    StoreError,
    safe_name,
)
from napari_sam3_onnx.engine.store.precompute import StoreBackedEncoder
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter
from napari_sam3_onnx.models.runtime import approximate_arithmetic


def same_model_input(
    plane: np.ndarray, rgb: bool, a: tuple[float, float] | None, b: tuple[float, float] | None
) -> bool:
    """Whether windows ``a`` and ``b`` map ``plane`` to the same ``(rows, cols, 3)`` uint8."""
    if a == b:
        return True
    return bool(np.array_equal(plane_to_rgb(plane, a, rgb), plane_to_rgb(plane, b, rgb)))


def _window(value) -> tuple[float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]))


class LookupStoreEncoder(StoreBackedEncoder):
    """A :class:`~.precompute.StoreBackedEncoder` that finds entries by content, not name.

    Parameters
    ----------
    adapter : SamAdapter
        The opened bundle (the one ``store.bundle`` describes).
    store : EmbeddingStore
        The store; opened ``"r"`` nothing is written to it.
    cache : EmbeddingCache, optional
        The in-memory cache in front of the store (the widget's, shared by every tab).
    model_id : Hashable
        Identity of the bundle in in-memory cache keys.
    image_name : callable, optional
        ``ref -> str``: the first guess of the image's name in the store (a layer's name);
        default ``str(ref.source)``.

    Attributes
    ----------
    found : int
        Planes (or tiles) served from the store.
    not_written : int
        New embeddings not stored because an entry of other data (another image of the same
        name, another window) holds their place; it is never replaced.
    """

    def __init__(
        self,
        adapter: SamAdapter,
        store: EmbeddingStore,
        cache: EmbeddingCache | None = None,
        model_id: Hashable = None,
        image_name: Callable[[SliceRef], str] | None = None,
    ) -> None:
        super().__init__(adapter, store, cache, model_id, image_name)
        self.found = self.not_written = 0
        self._names: dict[Hashable, str] = {}  # source -> its name in the store, once known
        self._names_lock = threading.Lock()

    def _encode(self, ref: SliceRef, need: Capability | None = None) -> Embedding:
        plane = extract_plane(ref.data, ref.index, ref.rgb, ref.region)
        key = self.entry_key(ref, plane)
        hit = self.find(ref.source, key, plane, ref.rgb)
        if hit is not None:
            stored = self.store.get(hit)
            if stored is not None:  # None: the entry failed its checksums; encode it again
                with self._names_lock:
                    self._names[ref.source] = hit.image
                    self.found += 1
                return stored
        target = None if self.store.mode == "r" else self._write_key(ref.source, key)
        if target is None:  # read-only, or the place holds another image's entry: keep it
            emb = self.adapter.encode(plane_to_rgb(plane, ref.window, ref.rgb))
            self._count_encode()
            return emb
        return self._encode_and_store(plane, ref, target)

    def find(self, source: Hashable, key: EntryKey, plane: np.ndarray,
             rgb: bool) -> EntryKey | None:
        """The key of a complete entry that holds ``plane`` as the model sees it, or None.

        Parameters
        ----------
        source : Hashable
            The image's identity in this session (names already found are tried first).
        key : EntryKey
            The plane's key under the guessed name and the viewer's window.
        plane : numpy.ndarray
            ``(rows, cols[, channels])`` pixels of the plane (or of ``key.region``).
        rgb : bool
            ``plane`` has colour channels.
        """
        with self._names_lock:
            known = self._names.get(source)
        names = [n for n in (known, key.image) if n is not None]
        names += [n for n in self.store.images() if n not in {safe_name(m) for m in names}]
        want = self.store.signature(key)
        want.pop("window")
        for name in names:
            candidate = replace(key, image=name)
            sig = self.store.stored_signature(candidate)
            if sig is None:
                continue
            theirs = _window(sig.pop("window", None))
            if sig == want and same_model_input(plane, rgb, key.window, theirs):
                return replace(candidate, window=theirs)
        return None

    def _write_key(self, source: Hashable, key: EntryKey) -> EntryKey | None:
        """Where a new entry goes; None where an entry of other data holds the place."""
        with self._names_lock:
            name = self._names.get(source, key.image)
        target = replace(key, image=name)
        if self.store.status(target) is EntryStatus.MISMATCH:
            with self._names_lock:
                self.not_written += 1
            return None
        return target


def open_lookup_encoder(
    adapter: SamAdapter,
    folder: Path | str,
    store: Path | str,
    write: bool = False,
    cache: EmbeddingCache | None = None,
    model_id: Hashable = None,
    image_name: Callable[[SliceRef], str] | None = None,
) -> LookupStoreEncoder:
    """A :class:`LookupStoreEncoder` for the bundle in ``folder`` over the store ``store``.

    Parameters
    ----------
    adapter : SamAdapter
        The bundle opened from ``folder``.
    folder : Path or str
        The bundle folder (the store must have been made for its files' contents).
    store : Path or str
        The store folder; with ``write`` it is created when missing.
    write : bool
        Add new embeddings to the store (else it is only read).
    cache, model_id, image_name
        As in :class:`LookupStoreEncoder`.

    Raises
    ------
    StoreMismatchError
        The store was made for another bundle or precision (the store's own message).
    StoreError
        ``store`` is not an embedding store (or, without ``write``, does not exist yet).
    """
    path = Path(store)
    if not write and not (path / "zarr.json").is_file():
        raise StoreError(f"No embedding store at {path}: choose the folder 'napari-sam3-onnx "
                         "precompute --store' wrote, or allow adding new embeddings to start "
                         "a new store there.")
    tag = BundleTag.for_folder(folder, adapter.layout, arithmetic=approximate_arithmetic(adapter))
    opened = EmbeddingStore(path, tag, None, "a" if write else "r")
    return LookupStoreEncoder(adapter, opened, cache, model_id, image_name)
