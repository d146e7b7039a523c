"""An on-disk store of slice embeddings (zarr v3): encode a stack once, anywhere, reuse it.

Layout of a store folder ``OUT.zarr``::

    OUT.zarr/                      group, attrs {"napari_sam3_onnx": {"format": ..., "version": 1}}
      <image>/                     one group per image (a file stem, or a name the caller picks)
        <index>/                   one group per slice, e.g. "00003" or "00001-00003" (t, z);
                                   a tile of a slice: "00003_r<r0>-<c0>-<r1>-<c1>"
          f0, f1, ...              the Embedding's feature arrays, chunked, fp32 or fp16

Each slice group carries, in its attributes, a **signature**: a fingerprint of the plane's
data, its index, the contrast window, the bundle (id, layout, weights digest) and the storage
precision. An entry is used only when its signature equals the one asked for, so a store made
with another window, other data or another bundle is never read by mistake. The arrays are
written first and the ``complete`` marker last, so an entry cut short by a crash, a Ctrl+C or
a killed cluster worker is recomputed, never read. Slices never share a chunk or a metadata
file, so many processes can fill one store at once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..models.base import Embedding
from ..models.errors import Sam3OnnxError
from .store_keys import BundleTag, EntryKey, EntryStatus, fingerprint, safe_name

__all__ = [
    "BundleTag", "EmbeddingStore", "EntryKey", "EntryStatus", "StoreError", "fingerprint",
    "safe_name",
]

FORMAT = "napari-sam3-onnx embedding store"
VERSION = 1
ROOT_KEY = "napari_sam3_onnx"
ENTRY_KEY = "napari_sam3_onnx_entry"
PRECISIONS = ("fp32", "fp16")
#: Largest chunk written, in bytes (features are split along their channel axis beyond it).
CHUNK_BYTES = 4 << 20


class StoreError(Sam3OnnxError):
    """The embedding store cannot be used (not a store, unwritable, a value fp16 cannot hold)."""


def _chunks(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Chunk shape: whole array, halved along its largest leading axis until <= CHUNK_BYTES."""
    chunks = [max(int(s), 1) for s in shape]
    while len(chunks) > 2 and int(np.prod(chunks)) * itemsize > CHUNK_BYTES:
        axis = int(np.argmax(chunks[:-2]))
        if chunks[axis] == 1:
            break
        chunks[axis] = (chunks[axis] + 1) // 2
    return tuple(chunks)


def _jsonable(value):
    return json.loads(json.dumps(value))


class EmbeddingStore:
    """Slice embeddings of one bundle and precision in a zarr v3 folder.

    Parameters
    ----------
    path : Path or str
        The store folder (created if missing, unless ``mode="r"``).
    bundle : BundleTag
        The bundle whose embeddings are read and written; entries of other bundles are refused.
    precision : {"fp32", "fp16"}, optional
        Storage precision of floating-point features. fp16 halves the size; features are read
        back in their original dtype, rounded to fp16's 11 significant bits. Default: the
        precision the store was created with (recorded in its root), fp32 for a new store.
    mode : {"a", "r"}
        ``"a"`` reads and writes, ``"r"`` only reads.

    Notes
    -----
    ``hits``, ``misses`` (missing or incomplete), ``refused`` (signature mismatch) and ``writes``
    count :meth:`get` and :meth:`put` calls.
    """

    def __init__(
        self, path: Path | str, bundle: BundleTag, precision: str | None = None, mode: str = "a"
    ) -> None:
        import zarr

        if precision not in (*PRECISIONS, None):
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if mode not in ("a", "r"):
            raise ValueError(f"mode must be 'a' or 'r', got {mode!r}")
        self.path = Path(path)
        self.bundle = bundle
        self.mode = mode
        self.hits = self.misses = self.refused = self.writes = 0
        self._lock = threading.Lock()
        if mode == "r" and not self.path.exists():
            raise StoreError(f"No embedding store at {self.path}.")
        if self.path.exists() and not (self.path / "zarr.json").is_file():
            if any(self.path.iterdir()):
                raise StoreError(f"{self.path} is a non-empty folder, not an embedding store.")
        try:
            self._root = zarr.open_group(str(self.path), mode="r" if mode == "r" else "a",
                                         zarr_format=3)
        except Exception as exc:
            raise StoreError(f"Cannot open {self.path} as a zarr v3 store ({exc}).") from exc
        meta = self._root.attrs.get(ROOT_KEY)
        if meta is None and mode == "a" and not list(self._root.keys()):
            meta = {"format": FORMAT, "version": VERSION, "precision": precision or "fp32"}
            self._root.attrs[ROOT_KEY] = meta
        elif not isinstance(meta, Mapping) or meta.get("format") != FORMAT:
            raise StoreError(f"{self.path} is a zarr store but not a napari-sam3-onnx embedding "
                             "store; choose a new folder for --store.")
        elif int(meta.get("version", 0)) > VERSION:
            raise StoreError(f"{self.path} was written by a newer napari-sam3-onnx "
                             f"(format {meta.get('version')}); update the plugin to read it.")
        self.precision = precision or str(meta.get("precision", "fp32"))

    # ---- signatures --------------------------------------------------------------------------
    def signature(self, key: EntryKey) -> dict:
        """The signature an entry for ``key`` must carry (JSON-ready)."""
        window = None if key.window is None else [float(key.window[0]), float(key.window[1])]
        sig = {
            "fingerprint": key.fingerprint, "index": [int(i) for i in key.index],
            "window": window, "rgb": bool(key.rgb), "bundle": self.bundle.id,
            "layout": self.bundle.layout, "weights": self.bundle.weights,
            "precision": self.precision,
        }
        if key.region is not None:  # whole-plane signatures stay as they were
            sig["region"] = [int(v) for v in key.region]
        return _jsonable(sig)

    def _entry_meta(self, key: EntryKey):
        try:
            group = self._root[key.path]
            meta = group.attrs.get(ENTRY_KEY)
        except Exception:  # missing node, or metadata cut short by a crash
            return None, None
        return group, meta

    def status(self, key: EntryKey) -> EntryStatus:
        """Whether ``key``'s entry is missing, half-written, made for other data, or usable."""
        group, meta = self._entry_meta(key)
        if group is None:
            return EntryStatus.MISSING
        if not isinstance(meta, Mapping) or not meta.get("complete"):
            return EntryStatus.INCOMPLETE
        if meta.get("signature") != self.signature(key):
            return EntryStatus.MISMATCH
        return EntryStatus.COMPLETE

    # ---- reading and writing ----------------------------------------------------------------
    def get(self, key: EntryKey) -> Embedding | None:
        """The stored embedding for ``key``, or None if missing, incomplete or mismatched."""
        state = self.status(key)
        with self._lock:
            if state is EntryStatus.MISMATCH:
                self.refused += 1
            elif state is not EntryStatus.COMPLETE:
                self.misses += 1
        if state is not EntryStatus.COMPLETE:
            return None
        group, meta = self._entry_meta(key)
        try:
            features = {
                name: np.asarray(group[f"f{i}"][...]).astype(dtype, copy=False)
                for i, (name, dtype) in enumerate(meta["features"])
            }
        except Exception:  # a chunk lost after the marker: treat as not there
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return Embedding(features, tuple(meta["input_size"]), tuple(meta["image_shape"]))

    def stored_features(self, embedding: Embedding) -> dict[str, np.ndarray]:
        """The arrays as they go to disk: floating features cast to the storage precision.

        Raises
        ------
        StoreError
            fp16 storage of a feature with finite values beyond fp16's range (+-65504).
        """
        out = {}
        for name, arr in embedding.features.items():
            arr = np.asarray(arr)
            if self.precision == "fp16" and np.issubdtype(arr.dtype, np.floating):
                finite = arr[np.isfinite(arr)]
                if finite.size and np.abs(finite).max() > np.finfo(np.float16).max:
                    raise StoreError(f"Feature {name!r} holds values beyond float16's range; "
                                     "store this bundle's embeddings in fp32 (no --fp16).")
                arr = arr.astype(np.float16)
            out[name] = arr
        return out

    def put(self, key: EntryKey, embedding: Embedding) -> Embedding:
        """Write ``embedding`` for ``key`` (replacing any old entry); the marker goes last.

        Returns
        -------
        Embedding
            The embedding as :meth:`get` will return it (fp16-rounded with ``"fp16"``).
        """
        if self.mode == "r":
            raise StoreError(f"The store {self.path} was opened read-only.")
        stored = self.stored_features(embedding)
        meta = {
            "signature": self.signature(key), "complete": False,
            "input_size": [int(v) for v in embedding.input_size],
            "image_shape": [int(v) for v in embedding.image_shape],
            "features": [[n, np.asarray(a).dtype.str] for n, a in embedding.features.items()],
        }
        image, slice_name = key.path.split("/")
        parent = self._root.require_group(image)
        group = parent.create_group(slice_name, overwrite=True, attributes={ENTRY_KEY: meta})
        for i, arr in enumerate(stored.values()):
            array = group.create_array(f"f{i}", shape=arr.shape, dtype=arr.dtype,
                                       chunks=_chunks(arr.shape, arr.dtype.itemsize))
            array[...] = arr
        group.attrs[ENTRY_KEY] = {**meta, "complete": True}
        with self._lock:
            self.writes += 1
        features = {n: stored[n].astype(np.asarray(a).dtype, copy=False)
                    for n, a in embedding.features.items()}
        return Embedding(features, embedding.input_size, embedding.image_shape)

    # ---- listing ----------------------------------------------------------------------------
    def prepare(self, images: Sequence[str]) -> None:
        """Create the image groups up front (before many processes write slices into them)."""
        for image in images:
            self._root.require_group(safe_name(image))

    def images(self) -> list[str]:
        """Names of the images that have a group in the store."""
        return sorted(self._root.group_keys())

    def entries(self, image: str) -> list[str]:
        """Slice group names of ``image`` (complete or not)."""
        name = safe_name(image)
        if name not in self._root:
            return []
        return sorted(self._root[name].group_keys())
