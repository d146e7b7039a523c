"""What identifies a stored slice embedding: data fingerprint, place, window, bundle.

These values make up an entry's signature in :class:`~.store.EmbeddingStore`; two entries are
interchangeable only when every part is equal. The bundle is identified by the content of its
files (:func:`~.bundle_digest.bundle_digest`), not by its folder's name.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from napari_sam3_onnx.engine.store.bundle_digest import bundle_digest


class EntryStatus(enum.StrEnum):
    """The state of one slice in a store."""

    MISSING = "missing"
    INCOMPLETE = "incomplete"
    """Started but never marked complete (interrupted): it will be recomputed."""
    MISMATCH = "mismatch"
    """Complete, but for other data, another window, bundle or precision: refused."""
    CORRUPT = "corrupt"
    """Marked complete, but an array is missing, unreadable or fails its checksum."""
    COMPLETE = "complete"


def fingerprint(plane: np.ndarray) -> str:
    """A digest of a plane's dtype, shape and values (BLAKE2b, 128 bits).

    Hashing runs at about 1 GB/s, far cheaper than encoding the plane; any change of a value,
    the dtype or the shape changes the digest.
    """
    arr = np.ascontiguousarray(plane)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{arr.dtype.str}{arr.shape}".encode())
    digest.update(arr.data.cast("B"))
    return "blake2b:" + digest.hexdigest()


@dataclass(frozen=True)
class BundleTag:
    """Which encoder produced an embedding.

    Attributes
    ----------
    id : str
        Bundle id (the registry id, or the bundle folder's name); shown in messages only.
    layout : str
        The adapter's layout id.
    weights : str
        Digest of the names and contents of the bundle's files (graphs, weights, constants,
        tokenizer: every file an adapter may read).
    """

    id: str
    layout: str
    weights: str = ""

    @property
    def identity(self) -> dict[str, str]:
        """What must be equal for two bundles to give the same embeddings (JSON-ready)."""
        return {"layout": self.layout, "weights": self.weights}

    @classmethod
    def for_folder(cls, folder: Path | str, layout: str, bundle_id: str | None = None,
                   arithmetic: str | None = None) -> BundleTag:
        """The tag of a bundle folder, by the content of its files.

        The first call hashes every file an adapter may read (seconds for a full bundle);
        later calls read the cached digests of the files that did not change. ``arithmetic``:
        an approximate arithmetic the runtime uses instead of the graphs' own (``"bf16"``:
        OpenVINO's bf16 inference precision); its embeddings differ from fp32's, so it is part
        of the identity and a store never mixes the two.
        """
        folder = Path(folder)
        digest = bundle_digest(folder) + (f"+{arithmetic}-arithmetic" if arithmetic else "")
        return cls(bundle_id or folder.name, layout, digest)


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
