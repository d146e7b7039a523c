"""What identifies a stored slice embedding: data fingerprint, place, window, bundle.

These values make up an entry's signature in :class:`~.store.EmbeddingStore`; two entries are
interchangeable only when every part is equal.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_WEIGHT_FILE = re.compile(r".*(\.onnx|\.onnx[._]data|\.data|\.bin|\.npz)$")


class EntryStatus(enum.StrEnum):
    """The state of one slice in a store."""

    MISSING = "missing"
    INCOMPLETE = "incomplete"
    """Started but never marked complete (interrupted): it will be recomputed."""
    MISMATCH = "mismatch"
    """Complete, but for other data, another window, bundle or precision: refused."""
    COMPLETE = "complete"


def fingerprint(plane: np.ndarray) -> str:
    """A digest of a plane's dtype, shape and values (BLAKE2b, 128 bits).

    Hashing runs at about 1 GB/s, far cheaper than encoding the plane; any change of a value,
    the dtype or the shape changes the digest.
    """
    arr = np.ascontiguousarray(plane)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{arr.dtype.str}{arr.shape}".encode())
    digest.update(memoryview(arr).cast("B"))
    return "blake2b:" + digest.hexdigest()


@dataclass(frozen=True)
class BundleTag:
    """Which encoder produced an embedding.

    Attributes
    ----------
    id : str
        Bundle id (the registry id, or the bundle folder's name).
    layout : str
        The adapter's layout id.
    weights : str
        Digest of the names and byte sizes of the bundle's graph and weight files.
    """

    id: str
    layout: str
    weights: str = ""

    @classmethod
    def for_folder(cls, folder: Path | str, layout: str, bundle_id: str | None = None) -> BundleTag:
        """The tag of a bundle folder (file sizes only are read, nothing is hashed)."""
        folder = Path(folder)
        files = sorted(p for p in folder.iterdir() if p.is_file() and _WEIGHT_FILE.match(p.name))
        digest = hashlib.blake2b(digest_size=8)
        for p in files:
            digest.update(f"{p.name}:{p.stat().st_size};".encode())
        return cls(bundle_id or folder.name, layout, digest.hexdigest())


@dataclass(frozen=True)
class EntryKey:
    """Where a slice's embedding lives and what its data must be.

    Attributes
    ----------
    image : str
        Name of the image in the store (letters, digits, ``._-``; other characters become ``_``).
    index : tuple[int, ...]
        Indices of the plane's leading axes (``()`` for a 2-D image).
    fingerprint : str
        :func:`fingerprint` of the plane as read (before the contrast window).
    window : tuple[float, float] or None
        Contrast window the plane was mapped through (None: uint8 as is / per-plane min-max).
    rgb : bool
        The plane has colour channels.
    region : tuple[int, int, int, int] or None
        ``(r0, c0, r1, c1)`` of a tile of the plane (then ``fingerprint`` is the tile's), or
        None for the whole plane.
    """

    image: str
    index: tuple[int, ...]
    fingerprint: str
    window: tuple[float, float] | None = None
    rgb: bool = False
    region: tuple[int, int, int, int] | None = None

    @property
    def path(self) -> str:
        """The entry's path inside the store, ``"<image>/<index>"``.

        A tile's path ends in ``"_r<r0>-<c0>-<r1>-<c1>"``.
        """
        index = "-".join(f"{int(i):05d}" for i in self.index) or "plane"
        if self.region is not None:
            index += "_r" + "-".join(str(int(v)) for v in self.region)
        return f"{safe_name(self.image)}/{index}"


def safe_name(name: str) -> str:
    """A zarr node name for ``name``: characters other than ``A-Za-z0-9._-`` become ``_``."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", str(name)).lstrip(".") or "image"
    return "_" + clean if clean.startswith("__") else clean
