"""An on-disk store of slice embeddings (zarr v3): encode a stack once, anywhere, reuse it.

Layout of a store folder ``OUT.zarr``::

    OUT.zarr/                      group, attrs {"napari_sam3_onnx": {"format", "version": 2,
                                   "precision", "bundle": {"id", "layout", "weights"}}}
      <image>/                     one group per image (a file stem, or a name the caller picks)
        <index>/                   one group per slice, e.g. "00003" or "00001-00003" (t, z);
                                   a tile of a slice: "00003_r<r0>-<c0>-<r1>-<c1>"
          f0, f1, ...              the Embedding's feature arrays, chunked, fp32 or fp16

A store belongs to **one bundle and one precision**, recorded in its root: the bundle by the
digest of its files' contents (see :mod:`.bundle_digest`). Opening it for another bundle or
precision is refused with a :class:`StoreMismatchError` (``replace=True`` discards its entries
and adopts the folder instead), so embeddings are never mixed up or silently re-encoded.

Each slice group carries, in its attributes, a **signature** (a fingerprint of the plane's data,
its index, the contrast window, the bundle's layout and weights digest, the storage precision)
and the **checksum** of every array. An entry is used only when its signature equals the one
asked for and every array reads back with its checksum, so a store made for other data is never
read, and a missing chunk (which zarr reads as zeros) or a flipped byte is detected, counted as
``corrupt`` and re-encoded, never served as features.

Entries are written whole under a temporary name and renamed into place (see
:mod:`.store_files`), and group nodes are created atomically, so several processes (cluster
workers, two terminals) can fill one store at once, even the same slices: an entry's path holds a
finished entry or nothing, and a writer killed half-way leaves only a ``.nso-tmp-*`` folder that
``napari-sam3-onnx store verify --repair`` removes.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from napari_sam3_onnx.engine.store import files as sf
from napari_sam3_onnx.engine.store.entries import SPEC_KEY, entry_spec, read_arrays
from napari_sam3_onnx.engine.store.keys import (
    BundleTag,
    EntryKey,
    EntryStatus,
    fingerprint,
    safe_name,
)
from napari_sam3_onnx.models.base import Embedding
from napari_sam3_onnx.models.errors import Sam3OnnxError

__all__ = [
    "BundleTag", "EmbeddingStore", "EntryKey", "EntryStatus", "StoreError", "StoreMismatchError",
    "fingerprint", "read_arrays", "safe_name",
]

FORMAT = "napari-sam3-onnx embedding store"
VERSION = 2
ROOT_KEY = "napari_sam3_onnx"
ENTRY_KEY = "napari_sam3_onnx_entry"
PRECISIONS = ("fp32", "fp16")
#: Largest chunk written, in bytes (features are split along their channel axis beyond it).
CHUNK_BYTES = 4 << 20
#: How a caller is told to proceed when a store belongs to another bundle or precision.
REPLACE_HINT = ("Choose another store folder, or empty this one and fill it for this bundle and "
                "precision with 'napari-sam3-onnx precompute ... --replace-store' (Python: "
                "api.precompute(..., replace_store=True)).")


class StoreError(Sam3OnnxError):
    """The embedding store cannot be used (not a store, unwritable, a value fp16 cannot hold)."""


class StoreMismatchError(StoreError):
    """The store was made for another bundle or precision (see :data:`REPLACE_HINT`)."""


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


def root_meta(bundle: BundleTag, precision: str) -> dict:
    """The root attributes of a store for ``bundle`` and ``precision``."""
    return {"format": FORMAT, "version": VERSION, "precision": precision,
            "bundle": {"id": bundle.id, **bundle.identity}}


def describe(meta: Mapping) -> str:
    """``bundle 'id' (layout, weights sha256:0123abcd..., fp16)`` for messages."""
    b = meta.get("bundle") or {}
    weights = str(b.get("weights", "?"))
    return (f"bundle {b.get('id', '?')!r} ({b.get('layout', '?')}, weights {weights[:15]}..., "
            f"{meta.get('precision', '?')})")


class EmbeddingStore:
    """Slice embeddings of one bundle and precision in a zarr v3 folder.

    Parameters
    ----------
    path : Path or str
        The store folder (created if missing, unless ``mode="r"``).
    bundle : BundleTag
        The bundle whose embeddings are read and written; a store made for another bundle (other
        file contents) is refused.
    precision : {"fp32", "fp16"}, optional
        Storage precision of floating-point features. fp16 halves the size; features are read
        back in their original dtype, rounded to fp16's 11 significant bits. Default: the
        precision the store was created with (recorded in its root), fp32 for a new store.
        Another precision than the store's is refused.
    mode : {"a", "r"}
        ``"a"`` reads and writes, ``"r"`` only reads.
    replace : bool
        If the store was made for another bundle or precision, discard its entries and adopt it
        for ``bundle`` and ``precision`` (instead of raising :class:`StoreMismatchError`). A
        store with no entries is adopted in any case.

    Notes
    -----
    ``hits``, ``misses`` (missing or incomplete), ``refused`` (signature mismatch), ``corrupt``
    (an array missing or failing its checksum) and ``writes`` count :meth:`get` and :meth:`put`
    calls.
    """

    def __init__(
        self, path: Path | str, bundle: BundleTag, precision: str | None = None, mode: str = "a",
        replace: bool = False,
    ) -> None:
        if precision not in (*PRECISIONS, None):
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if mode not in ("a", "r"):
            raise ValueError(f"mode must be 'a' or 'r', got {mode!r}")
        self.path = Path(path)
        self.bundle = bundle
        self.mode = mode
        self.hits = self.misses = self.refused = self.corrupt = self.writes = 0
        self._lock = threading.Lock()
        if mode == "r" and not self.path.exists():
            raise StoreError(f"No embedding store at {self.path}.")
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"{self.path} is a file, not an embedding store (a folder).")
        if self.path.exists() and not (self.path / "zarr.json").is_file():
            if any(not sf.is_leftover(p.name) for p in self.path.iterdir()):
                raise StoreError(f"{self.path} is a non-empty folder, not an embedding store.")
        if mode == "a":
            try:
                sf.create_node(self.path, {ROOT_KEY: root_meta(bundle, precision or "fp32")})
            except OSError as exc:
                raise StoreError(f"Cannot create the store {self.path} ({exc}).") from exc
        meta = self._open()
        self.precision = precision or str(meta.get("precision", "fp32"))
        problem = self._identity_problem(meta, precision)
        if problem and mode == "a" and (replace or not self._count()):  # empty: nothing to lose
            self._reset(root_meta(bundle, self.precision))
        elif problem:
            raise StoreMismatchError(f"{problem} {REPLACE_HINT}")

    def _open(self) -> Mapping:
        import zarr

        try:
            self._root = zarr.open_group(str(self.path), mode=self.mode, zarr_format=3)
        except Exception as exc:
            raise StoreError(f"Cannot open {self.path} as a zarr v3 store ({exc}).") from exc
        meta = self._root.attrs.get(ROOT_KEY)
        if not isinstance(meta, Mapping) or meta.get("format") != FORMAT:
            raise StoreError(f"{self.path} is a zarr store but not a napari-sam3-onnx embedding "
                             "store; choose a new folder for --store.")
        if int(meta.get("version", 0)) > VERSION:
            raise StoreError(f"{self.path} was written by a newer napari-sam3-onnx "
                             f"(format {meta.get('version')}); update the plugin to read it.")
        self._spec = meta.get(SPEC_KEY)
        return meta

    def _count(self) -> int:
        """Entries in the store (complete or not)."""
        return sum(len(self.entries(image)) for image in self.images())

    def _identity_problem(self, meta: Mapping, precision: str | None) -> str:
        """Why the store cannot serve this bundle and precision ("" if it can)."""
        if int(meta.get("version", 0)) < VERSION:
            return (f"The store {self.path} was written by an older napari-sam3-onnx that told "
                    f"bundles apart by file sizes only; its {self._count()} entries cannot be "
                    "trusted.")
        theirs = {k: (meta.get("bundle") or {}).get(k) for k in ("layout", "weights")}
        if theirs == self.bundle.identity and precision in (None, meta.get("precision")):
            return ""
        return (f"The store {self.path} holds {self._count()} embedding(s) of {describe(meta)}; "
                f"this run uses {describe(root_meta(self.bundle, self.precision))}.")

    def _reset(self, meta: dict) -> None:
        """Remove every entry and record ``meta`` as the store's identity."""
        for name in sf.child_nodes(self.path):
            sf.remove(self.path / name)
        for left in sf.leftovers(self.path):
            shutil.rmtree(left, ignore_errors=True)
        sf.replace_node_metadata(self.path, {ROOT_KEY: meta})
        self._open()

    # ---- signatures --------------------------------------------------------------------------
    def signature(self, key: EntryKey) -> dict:
        """The signature an entry for ``key`` must carry (JSON-ready)."""
        window = None if key.window is None else [float(key.window[0]), float(key.window[1])]
        sig = {
            "fingerprint": key.fingerprint, "index": [int(i) for i in key.index],
            "window": window, "rgb": bool(key.rgb), **self.bundle.identity,
            "precision": self.precision,
        }
        if key.region is not None:  # whole-plane signatures stay as they were
            sig["region"] = [int(v) for v in key.region]
        return _jsonable(sig)

    def _entry_meta(self, key: EntryKey) -> tuple[Any, Any]:
        try:
            group = self._root[key.path]
            meta = group.attrs.get(ENTRY_KEY)
        except Exception:  # missing node, or damaged metadata
            return None, None
        return group, meta

    def _state(self, group, meta, key: EntryKey) -> EntryStatus:
        if group is None:
            return EntryStatus.MISSING
        if not isinstance(meta, Mapping) or not meta.get("complete"):
            return EntryStatus.INCOMPLETE
        if meta.get("signature") != self.signature(key):
            return EntryStatus.MISMATCH
        return EntryStatus.COMPLETE

    def status(self, key: EntryKey) -> EntryStatus:
        """Whether ``key``'s entry is missing, half-written, made for other data, or complete.

        Reads metadata only; :meth:`check` also verifies the arrays.
        """
        return self._state(*self._entry_meta(key), key)

    def stored_signature(self, key: EntryKey) -> dict | None:
        """The signature of the complete entry at ``key``'s path (None: missing, half-written).

        Reads metadata only; the entry may have been made for other data (compare it with
        :meth:`signature`).
        """
        group, meta = self._entry_meta(key)
        if group is None or not isinstance(meta, Mapping) or not meta.get("complete"):
            return None
        sig = meta.get("signature")
        return dict(sig) if isinstance(sig, Mapping) else None

    def check(self, key: EntryKey) -> EntryStatus:
        """:meth:`status`, with a complete entry's arrays read and checked (else ``CORRUPT``)."""
        return self._read(key)[0]

    def _read(self, key: EntryKey):
        """``(status, meta, arrays)``; arrays None unless the entry is complete and intact.

        A failed read is tried once more: another writer may have replaced the entry while it
        was read (then the new one is read whole).
        """
        for _ in range(2):
            group, meta = self._entry_meta(key)
            state = self._state(group, meta, key)
            if state is not EntryStatus.COMPLETE:
                return state, meta, None
            stored = read_arrays(group, meta, self._spec)
            if stored is not None:
                return state, meta, stored
        return EntryStatus.CORRUPT, meta, None

    # ---- reading and writing ----------------------------------------------------------------
    def get(self, key: EntryKey) -> Embedding | None:
        """The stored embedding for ``key``; None if missing, incomplete, mismatched or corrupt."""
        state, meta, stored = self._read(key)
        with self._lock:
            if state is EntryStatus.MISMATCH:
                self.refused += 1
            elif state is EntryStatus.CORRUPT:
                self.corrupt += 1
            elif stored is None:
                self.misses += 1
            else:
                self.hits += 1
        if stored is None:
            return None
        features = {name: stored[name].astype(dtype, copy=False) for name, dtype in
                    meta["features"]}
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
        """Write ``embedding`` for ``key``, replacing any old entry, as one whole entry.

        The arrays and their checksums are written under a temporary name, the ``complete``
        marker last, and the entry is then renamed into place.

        Returns
        -------
        Embedding
            The embedding as :meth:`get` will return it (fp16-rounded with ``"fp16"``).
        """
        import zarr

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
        folder = self.path / image
        sf.create_node(folder)
        tmp = folder / sf.temp_name(slice_name)
        try:
            group = zarr.open_group(str(tmp), mode="w", zarr_format=3,
                                    attributes={ENTRY_KEY: meta})
            records = []
            for i, arr in enumerate(stored.values()):
                array = group.create_array(f"f{i}", shape=arr.shape, dtype=arr.dtype,
                                           chunks=_chunks(arr.shape, arr.dtype.itemsize))
                array[...] = arr
                records.append({"shape": list(arr.shape), "dtype": arr.dtype.str,
                                sf.CHECKSUM: sf.checksum(arr)})
            meta = {**meta, "arrays": records, "complete": True}
            group.attrs[ENTRY_KEY] = meta
            sf.place(tmp, folder / slice_name)
        except BaseException:
            sf.settle_io()  # an interruption leaves zarr's writes running: let them end first
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        with self._lock:
            self.writes += 1
        if self._spec is None:
            self._record_spec(entry_spec(meta))
        features = {n: stored[n].astype(np.asarray(a).dtype, copy=False)
                    for n, a in embedding.features.items()}
        return Embedding(features, embedding.input_size, embedding.image_shape)

    def _record_spec(self, spec: dict) -> None:
        """Record in the root what this bundle's entries look like (once, from a real one)."""
        import zarr

        current = dict(zarr.open_group(str(self.path), mode="r", zarr_format=3)
                       .attrs.get(ROOT_KEY) or {})
        if current.get("format") == FORMAT and SPEC_KEY not in current:
            sf.replace_node_metadata(self.path, {ROOT_KEY: {**current, SPEC_KEY: spec}})
        self._spec = current.get(SPEC_KEY, spec)

    # ---- listing ----------------------------------------------------------------------------
    def prepare(self, images: Sequence[str]) -> None:
        """Create the image groups up front (safe while other processes do the same)."""
        for image in images:
            sf.create_node(self.path / safe_name(image))

    def images(self) -> list[str]:
        """Names of the images that have a group in the store."""
        return sf.child_nodes(self.path)

    def entries(self, image: str) -> list[str]:
        """Slice group names of ``image`` (complete or not; no temporary leftovers)."""
        return sf.child_nodes(self.path / safe_name(image))
