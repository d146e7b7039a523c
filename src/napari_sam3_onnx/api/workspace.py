"""The workspace every workflow runs over: one model, its encoder and caches, store and settings.

A :class:`Workspace` is what the search, propagation and segmentation generators
(:mod:`.search`, :mod:`.propagate`, :mod:`.automatic`) need besides their inputs: the adapter,
the one :class:`~napari_sam3_onnx.engine.encoding.SliceEncoder` (single-flight cache, optionally
backed by an embedding store), the one language-encoder cache, the tiling setting and a data
version per image. The headless API makes one per call from a :class:`~.bundles.Bundle`; the
dock makes one for its lifetime and attaches each model it loads to it, so every tab shares the
same encoder, cache and text cache. Attaching is :meth:`Workspace.prepare` (the slow part: a
store's bundle digest and opening it) then :meth:`Workspace.use` (cheap); :meth:`Workspace.attach`
does both in the caller's thread (the API, the CLI), the dock runs ``prepare`` in a worker.
No Qt here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from ..engine.cache import EmbeddingCache
from ..engine.concepts.search import TextCache
from ..engine.concepts.tokenizer import ClipTokenizer
from ..engine.encoding import SliceEncoder, SliceRef
from ..engine.store.lookup import open_lookup_encoder
from ..engine.tiling.tiles import TileSettings
from ..models.base import Capability, SamAdapter
from ..models.errors import Sam3OnnxError


def language_cache(adapter: SamAdapter, folder: Path | str) -> TextCache:
    """The language-encoder cache of a bundle (its tokenizer read with the graph's context length).

    The one place a :class:`TextCache` is built for a workflow.

    Raises
    ------
    MissingCapabilityError
        The bundle has no language encoder.
    ModelFileMissingError
        The folder holds no tokenizer file.
    """
    adapter.require(Capability.TEXT)
    return TextCache(adapter, ClipTokenizer.from_folder(
        Path(folder), adapter.concept_detector.context_length))


class DataVersions:
    """A counter per image (its ``SliceRef.source``), bumped whenever the image's data change.

    The version is part of every slice reference, so embeddings of the old data are never
    served for the new.
    """

    def __init__(self) -> None:
        self._counts: dict[Hashable, int] = {}

    def get(self, source: Hashable) -> int:
        """The current version of ``source`` (0 until its data first change)."""
        return self._counts.get(source, 0)

    def bump(self, source: Hashable) -> int:
        """Record a change of ``source``'s data; returns the new version."""
        self._counts[source] = self.get(source) + 1
        return self._counts[source]


@dataclass(frozen=True)
class Attachment:
    """A model with its encoder, ready to attach (:meth:`Workspace.prepare` makes it).

    Attributes
    ----------
    adapter : SamAdapter
        The model.
    folder : Path
        Its bundle folder.
    encoder : SliceEncoder
        Its encoder on the workspace's cache (store-backed when ``store`` is set).
    store : Path or None
        The embedding store's folder (None: memory only).
    """

    adapter: SamAdapter
    folder: Path
    encoder: SliceEncoder
    store: Path | None


class Workspace:
    """One model and what every workflow shares around it.

    Parameters
    ----------
    cache : EmbeddingCache, optional
        The embedding cache (default: a new one with the default budget). It outlives the
        models attached: each model's embeddings are keyed by its own identity.
    tiling : TileSettings, optional
        Search, segment and prompt large planes tile by tile (None: whole planes).

    Attributes
    ----------
    adapter : SamAdapter or None
        The attached model (None: none yet).
    folder : Path or None
        Its bundle folder.
    encoder : SliceEncoder or None
        The one encoder every workflow uses (store-backed when a store is attached; None
        without a model, or while :meth:`pause` holds it back).
    store : Path or None
        The attached embedding store's folder.
    tiling : TileSettings or None
        As the parameter; the dock's "Tile large planes" sets it.
    versions : DataVersions
        Data versions of the images (part of slice references).

    Examples
    --------
    >>> ws = bundle.workspace("nuclei.zarr")                     # from an opened Bundle
    >>> ws = api.Workspace()                                    # or one for many models
    >>> ws.attach(adapter, folder, store="nuclei.zarr")
    >>> steps = api.iter_search(ws, api.refs_along_axis(stack), ["nucleus"])
    """

    def __init__(self, cache: EmbeddingCache | None = None,
                 tiling: TileSettings | None = None) -> None:
        self.cache = cache if cache is not None else EmbeddingCache()
        self.tiling = tiling
        self.versions = DataVersions()
        self.adapter: SamAdapter | None = None
        self.folder: Path | None = None
        self.encoder: SliceEncoder | None = None
        self.store: Path | None = None
        self._texts: TextCache | None = None
        self._language: Callable[[], TextCache] | None = None

    @classmethod
    def for_encoder(cls, encoder: SliceEncoder, folder: Path | str,
                    tiling: TileSettings | None = None,
                    language: Callable[[], TextCache] | None = None) -> Workspace:
        """A workspace over an encoder built elsewhere (the headless API's store-backed one).

        ``language`` returns the language cache on first use (a :class:`~.bundles.Bundle`
        passes its own, so the language encoder runs once per phrase across calls); default
        :func:`language_cache`.
        """
        ws = cls(encoder.cache, tiling)
        ws.adapter, ws.folder, ws.encoder = encoder.adapter, Path(folder), encoder
        ws._language = language
        return ws

    # ---- the model ---------------------------------------------------------------------
    def prepare(self, adapter: SamAdapter, folder: Path | str, store: Path | str | None = None,
                write: bool = False,
                image_name: Callable[[SliceRef], str] | None = None) -> Attachment:
        """The slow half of :meth:`attach`: the encoder for ``adapter``, over ``store`` if given.

        With a store this hashes the bundle's weight files (seconds for a full-size bundle the
        first time, see :mod:`~napari_sam3_onnx.engine.store.bundle_digest`) and opens the
        store (created when missing, with ``write``). It changes nothing in the workspace, so
        the dock runs it in a worker thread and hands the result to :meth:`use` on its own
        thread.

        Raises
        ------
        StoreMismatchError, StoreError
            ``store`` cannot be used for this bundle.
        """
        folder = Path(folder)
        model_id = (str(folder.resolve()), adapter.layout)
        if store is None:
            encoder: SliceEncoder = SliceEncoder(adapter, self.cache, model_id=model_id)
        else:
            encoder = open_lookup_encoder(adapter, folder, store, write, self.cache, model_id,
                                          image_name)
        return Attachment(adapter, folder, encoder, None if store is None else Path(store))

    def use(self, attachment: Attachment) -> SliceEncoder:
        """Attach what :meth:`prepare` made (cheap: no file is read).

        The language cache is kept when the same model is attached again (another store).
        """
        if attachment.adapter is not self.adapter:
            self._texts, self._language = None, None
        self.adapter, self.folder = attachment.adapter, attachment.folder
        self.encoder, self.store = attachment.encoder, attachment.store
        return attachment.encoder

    def attach(self, adapter: SamAdapter, folder: Path | str, store: Path | str | None = None,
               write: bool = False,
               image_name: Callable[[SliceRef], str] | None = None) -> SliceEncoder:
        """Use ``adapter`` (opened from ``folder``) from now on, backed by ``store`` if given.

        :meth:`prepare` then :meth:`use`, in the caller's thread. The language cache is kept
        when the same model is attached again (another store).

        Raises
        ------
        StoreMismatchError, StoreError
            ``store`` cannot be used for this bundle; nothing is attached then.
        """
        return self.use(self.prepare(adapter, folder, store, write, image_name))

    def adopt_texts(self, texts: TextCache) -> None:
        """Use ``texts`` (built for the attached model, e.g. in a worker) as its language cache."""
        if texts.adapter is not self.adapter:
            raise ValueError("the language cache was built for another model")
        self._texts = texts

    def pause(self) -> None:
        """No encoder until the next :meth:`use` (a store is being checked for the model).

        The model, its folder and language cache stay, so a tab still knows what the model can
        do, but nothing can encode: no run starts against a store that is not attached yet.
        """
        self.encoder = self.store = None

    def detach(self) -> None:
        """No model (a load failed); the cache and data versions stay."""
        self.adapter = self.folder = self.encoder = self.store = None
        self._texts = self._language = None

    def has(self, capability: Capability) -> bool:
        """Whether a model is attached and has ``capability``."""
        return self.adapter is not None and self.adapter.has(capability)

    def box_texts(self) -> TextCache | None:
        """The language cache a detector-only bundle answers boxes with (SAM 3's "visual").

        None with a SAM head (boxes go to its prompt decoder) or without a detector.
        """
        if self.has(Capability.CLICKS) or not self.has(Capability.TEXT):
            return None
        return self.texts

    @property
    def texts(self) -> TextCache:
        """The model's one language cache, built on first use.

        Raises
        ------
        Sam3OnnxError
            No model attached.
        MissingCapabilityError
            A model without a language encoder.
        ModelFileMissingError
            The bundle folder has no tokenizer file.
        """
        if self._texts is None:
            if self.adapter is None or self.folder is None:
                raise Sam3OnnxError("Load a model first: no model is attached.")
            self._texts = (self._language() if self._language is not None
                           else language_cache(self.adapter, self.folder))
        return self._texts
