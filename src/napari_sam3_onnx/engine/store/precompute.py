"""Encode through an on-disk store: a second-level cache behind the in-memory one.

:class:`StoreBackedEncoder` is a :class:`~.encoding.SliceEncoder` whose misses look in an
:class:`~.store.EmbeddingStore` before running the image encoder, and whose fresh encodings are
written there. The widget can thus read a stack that was precomputed elsewhere (a cluster, the
command line) with no encoding at all, and :func:`precompute` fills a store resumably.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from napari_sam3_onnx.engine.cache import EmbeddingCache
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.slices import extract_plane, plane_to_rgb
from napari_sam3_onnx.engine.store.embedding_store import (
    EmbeddingStore,
    EntryKey,
    EntryStatus,
    fingerprint,
)
from napari_sam3_onnx.engine.tiling.tiles import as_box
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter


class StoreBackedEncoder(SliceEncoder):
    """A :class:`SliceEncoder` that reads and writes an :class:`EmbeddingStore`.

    Parameters
    ----------
    adapter : SamAdapter
        The opened bundle; it must be the bundle ``store.bundle`` describes.
    store : EmbeddingStore
        The on-disk store.
    cache : EmbeddingCache, optional
        The in-memory cache in front of the store.
    model_id : Hashable
        Identity of the bundle in in-memory cache keys.
    image_name : callable, optional
        ``ref -> str``: the image's name in the store; default ``str(ref.source)``.

    Notes
    -----
    ``encoder_calls`` counts real encoder runs only; a plane found in the store costs a read
    of the plane (for its fingerprint) and of its features.
    """

    def __init__(
        self,
        adapter: SamAdapter,
        store: EmbeddingStore,
        cache: EmbeddingCache | None = None,
        model_id: Hashable = None,
        image_name: Callable[[SliceRef], str] | None = None,
    ) -> None:
        super().__init__(adapter, cache, model_id)
        self.store = store
        self.image_name = image_name or (lambda ref: str(ref.source))

    def variant(self, need: Capability | None) -> str | None:
        """Always the default encoder: a store holds one embedding per plane, for every workflow.

        A per-workflow bundle's other encoders (int8 for some workflows) are not used with a
        store, so what it keeps stays the bundle's default (fp32) embedding.
        """
        return None

    def entry_key(self, ref: SliceRef, plane: np.ndarray) -> EntryKey:
        """The store key of a plane (or of its region) already read from ``ref``."""
        window = None if ref.window is None else (float(ref.window[0]), float(ref.window[1]))
        region = None if ref.region is None else as_box(ref.region)
        return EntryKey(self.image_name(ref), tuple(int(i) for i in ref.index),
                        fingerprint(plane), window, bool(ref.rgb), region)

    def _encode(self, ref: SliceRef, need: Capability | None = None) -> Embedding:
        # ``need`` is not used: what the store keeps must serve every workflow, so it is whole
        plane = extract_plane(ref.data, ref.index, ref.rgb, ref.region)
        key = self.entry_key(ref, plane)
        stored = self.store.get(key)
        if stored is not None:
            return stored
        return self._encode_and_store(plane, ref, key)

    def _encode_and_store(self, plane: np.ndarray, ref: SliceRef, key: EntryKey) -> Embedding:
        emb = self.adapter.encode(plane_to_rgb(plane, ref.window, ref.rgb))
        self._count_encode()
        if self.store.mode == "r":
            return emb
        return self.store.put(key, emb)

    def ensure_entry(self, ref: SliceRef, plane: np.ndarray | None = None) -> str:
        """Make sure the store holds a valid entry for ``ref``; say what it took.

        A complete entry is read once to check its arrays' checksums, but nothing enters the
        in-memory cache, so a long precompute does not fill memory.

        Parameters
        ----------
        ref : SliceRef
            The plane (its ``source`` names the image in the store).
        plane : numpy.ndarray, optional
            The plane's pixels (its region's, when ``ref.region`` is set) if already read
            (``ref.data`` is then not used).

        Returns
        -------
        str
            ``"skipped"`` (a valid entry was there), ``"repaired"`` (a half-written or corrupt
            entry was encoded again) or ``"encoded"``.
        """
        if plane is None:
            plane = extract_plane(ref.data, ref.index, ref.rgb, ref.region)
        key = self.entry_key(ref, plane)
        state = self.store.check(key)
        if state is EntryStatus.COMPLETE:
            return "skipped"
        self._encode_and_store(plane, ref, key)
        return "repaired" if state in (EntryStatus.INCOMPLETE, EntryStatus.CORRUPT) else "encoded"

    def ensure(self, ref: SliceRef, plane: np.ndarray | None = None) -> bool:
        """:meth:`ensure_entry`, True if it had to encode."""
        return self.ensure_entry(ref, plane) != "skipped"


@dataclass
class PrecomputeReport:
    """What :func:`precompute` did.

    Attributes
    ----------
    encoded : int
        Slices encoded and written now (``repaired`` included).
    skipped : int
        Slices whose complete, matching entry was already in the store (checksums verified).
    total : int
        Slices asked for.
    repaired : int
        Of ``encoded``, slices whose entry was there but half-written or corrupt (a missing
        chunk, a flipped byte).
    """

    encoded: int = 0
    skipped: int = 0
    total: int = 0
    repaired: int = 0

    @property
    def done(self) -> int:
        """Slices finished (encoded or skipped)."""
        return self.encoded + self.skipped

    def merge(self, other: PrecomputeReport) -> PrecomputeReport:
        """The sum of two reports."""
        return PrecomputeReport(self.encoded + other.encoded, self.skipped + other.skipped,
                                self.total + other.total, self.repaired + other.repaired)

    def count(self, outcome: str) -> None:
        """Add one slice's outcome (from :meth:`StoreBackedEncoder.ensure_entry`)."""
        if outcome == "skipped":
            self.skipped += 1
        else:
            self.encoded += 1
            self.repaired += outcome == "repaired"


def precompute(
    encoder: StoreBackedEncoder,
    refs: Sequence[SliceRef],
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> PrecomputeReport:
    """Fill the store with the embeddings of ``refs``, skipping complete, intact entries.

    Entries already there are checked (signature and checksums); broken ones are encoded again
    and counted in ``repaired``.

    Parameters
    ----------
    encoder : StoreBackedEncoder
        Encoder and store.
    refs : Sequence[SliceRef]
        The planes, in order.
    progress : callable, optional
        ``progress(done, total)`` after each plane.
    cancelled : callable, optional
        Checked before each plane; when it returns True the work stops (finished entries stay,
        and a later call resumes with the rest).

    Returns
    -------
    PrecomputeReport
        Counts of encoded and skipped planes.
    """
    report = PrecomputeReport(total=len(refs))
    for ref in refs:
        if cancelled is not None and cancelled():
            break
        report.count(encoder.ensure_entry(ref))
        if progress is not None:
            progress(report.done, report.total)
    return report
