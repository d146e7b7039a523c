"""Open a bundle for headless work: by registry id or folder, with its caches and tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from ..engine.cache import EmbeddingCache
from ..engine.concepts.search import TextCache
from ..engine.encoding import SliceEncoder, SliceRef
from ..engine.store.embedding_store import BundleTag, EmbeddingStore
from ..engine.store.precompute import StoreBackedEncoder
from ..engine.tiling.tiles import TileSettings
from ..models.base import Capability, SamAdapter
from ..models.bundle import open_adapter as _open_adapter
from ..models.errors import ModelFileMissingError
from ..models.registry import bundle_dir, get_bundle
from ..models.runtime import RuntimeConfig, approximate_arithmetic
from .bundle_fetch import build_here
from .io import InputError
from .workspace import Workspace, language_cache


def resolve_bundle(bundle: str | Path, root: Path | str | None = None) -> Path:
    """The folder of ``bundle``: an existing folder, or a registry id under the data folder.

    Raises
    ------
    InputError
        ``bundle`` looks like a path but no such folder exists.
    UnknownBundleError
        ``bundle`` is neither a folder nor a registered id (a ``KeyError``; lists the ids).
    ModelFileMissingError
        A registered bundle that has not been downloaded yet.
    """
    path = Path(bundle)
    if path.is_dir():
        return path
    text = str(bundle)
    if path.exists() or "/" in text or "\\" in text or text.startswith("."):
        raise InputError(f"No bundle folder at {path}: give a folder holding the bundle's .onnx "
                         "files, or a bundle id (napari-sam3-onnx list).")
    spec = get_bundle(text)
    folder = bundle_dir(spec.id, root)
    if spec.builder:  # the toy: built here (once) rather than downloaded
        return build_here(spec, folder)
    if not folder.is_dir():
        raise ModelFileMissingError(folder, f"The {spec.id} bundle is not downloaded yet: run "
                                    f"'napari-sam3-onnx fetch {spec.id}'.")
    return folder


class Bundle:
    """An opened bundle with what headless work needs around it.

    Parameters
    ----------
    adapter : SamAdapter
        The layout adapter (sessions load lazily).
    folder : Path
        The bundle folder.
    config : RuntimeConfig, optional
        How the adapter's sessions were created (cluster workers open theirs the same way).

    Attributes
    ----------
    tag : BundleTag
        Identity of the bundle in embedding-store signatures, by the content of its files
        (computed on first use: hashing a full bundle takes seconds, once; see
        :mod:`~napari_sam3_onnx.engine.store.bundle_digest`).
    cache : EmbeddingCache
        In-memory embeddings reused by :func:`~napari_sam3_onnx.api.segment` calls.

    Examples
    --------
    >>> with api.open_bundle("hf-tracker") as bundle:          # sessions closed on exit
    ...     ws = bundle.workspace("nuclei.zarr")                 # encoder over the store
    ...     print(bundle.capabilities)
    """

    def __init__(
        self, adapter: SamAdapter, folder: Path | str, config: RuntimeConfig | None = None
    ) -> None:
        self.adapter = adapter
        self.folder = Path(folder)
        self.config = config or RuntimeConfig()
        self.cache = EmbeddingCache()
        self._texts: TextCache | None = None

    @cached_property
    def tag(self) -> BundleTag:
        """Identity of the bundle in embedding stores (see the class attributes)."""
        return BundleTag.for_folder(self.folder, self.adapter.layout,
                                    arithmetic=approximate_arithmetic(self.adapter))

    @property
    def id(self) -> str:
        """The bundle's id (its folder name)."""
        return self.folder.name

    @property
    def layout(self) -> str:
        """The layout id of the adapter."""
        return self.adapter.layout

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the bundle can do."""
        return self.adapter.capabilities

    @property
    def texts(self) -> TextCache:
        """Language-encoder outputs per phrase (the tokenizer is read from the folder once)."""
        if self._texts is None:
            self._texts = language_cache(self.adapter, self.folder)
        return self._texts

    def workspace(
        self, store: EmbeddingStore | Path | str | None = None,
        cache: EmbeddingCache | None = None, tiling: TileSettings | None = None,
    ) -> Workspace:
        """A workspace for one workflow run.

        It holds this bundle's encoder (over ``store`` when given, on ``cache``), its language
        cache (shared across runs) and ``tiling``.
        """
        st = None if store is None else self.open_store(store)
        return Workspace.for_encoder(self.encoder(st, cache), self.folder, tiling,
                                     language=lambda: self.texts)

    def open_store(
        self, path: Path | str | EmbeddingStore, precision: str | None = None, mode: str = "a",
        replace_store: bool = False,
    ) -> EmbeddingStore:
        """Open an embedding store for this bundle (``path`` may already be a store).

        Parameters
        ----------
        path : Path, str or EmbeddingStore
            The store folder, or an opened store.
        precision : {"fp32", "fp16"}, optional
            Storage precision (default: the store's own, fp32 for a new store).
        mode : {"a", "r"}
            Read and write, or read only.
        replace_store : bool
            A store made for another bundle or precision is emptied and adopted (otherwise
            refused).

        Raises
        ------
        ValueError
            ``path`` is a store opened for another bundle.
        StoreMismatchError
            The folder holds a store of another bundle or precision and ``replace_store`` is
            False.
        """
        if isinstance(path, EmbeddingStore):
            if path.bundle.identity != self.tag.identity:
                raise ValueError(f"The store was opened for bundle {path.bundle.id!r}, not "
                                 f"{self.tag.id!r}.")
            return path
        return EmbeddingStore(path, self.tag, precision, mode, replace=replace_store)

    def encoder(
        self,
        store: EmbeddingStore | None = None,
        cache: EmbeddingCache | None = None,
        image_name: Callable[[SliceRef], str] | None = None,
    ) -> SliceEncoder:
        """A slice encoder for this bundle, backed by ``store`` when one is given."""
        if store is None:
            return SliceEncoder(self.adapter, cache, model_id=self._cache_id)
        return StoreBackedEncoder(self.adapter, store, cache, self._cache_id, image_name)

    @property
    def _cache_id(self) -> tuple[str, str]:
        """The bundle in in-memory cache keys (one opened folder: no hashing needed)."""
        return (str(self.folder), self.layout)

    def close(self) -> None:
        """Release the ONNX sessions."""
        self.adapter.close()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        caps = ", ".join(sorted(c.value for c in self.capabilities))
        return f"Bundle({self.id!r}, layout={self.layout!r}, capabilities=[{caps}])"


def open_bundle(
    bundle: str | Path,
    providers: str | tuple[str, ...] = "auto",
    threads: int = 0,
    root: Path | str | None = None,
) -> Bundle:
    """Open a bundle by registry id (downloaded under the data folder) or by folder.

    Parameters
    ----------
    bundle : str or Path
        A registry id such as ``"hf-tracker"`` or a folder of ``.onnx`` files.
    providers : str or tuple of str
        ``"auto"`` or execution providers / aliases (``"cpu"``, ``"cuda"``), best first.
    threads : int
        Threads per operator (0: onnxruntime's choice, all physical cores).
    root : Path or str, optional
        Data folder holding ``models/<id>`` (default ``$NAPARI_SAM3_ONNX_HOME`` or the user
        cache).

    Returns
    -------
    Bundle
        Recognised from its graphs; weights load on first use.

    Examples
    --------
    >>> bundle = api.open_bundle("hf-tracker", providers="cpu", threads=4)
    >>> bundle = api.open_bundle("/data/models/my-export")     # a folder of .onnx files
    """
    if int(threads) < 0:
        raise InputError(f"threads={threads}: give 1 or more (or 0 for onnxruntime's choice).")
    folder = resolve_bundle(bundle, root)
    config = RuntimeConfig(providers=providers, intra_op_threads=int(threads))
    return Bundle(_open_adapter(folder, config), folder, config)


def as_bundle(model_or_folder: Bundle | str | Path) -> Bundle:
    """``model_or_folder`` if it is an opened :class:`Bundle`, else :func:`open_bundle` of it.

    The one-call workflow functions take either, so ``api.segment_all("hf-tracker", data)``
    works as well as ``api.segment_all(bundle, data)`` (the second reuses the bundle's sessions
    and caches across calls).
    """
    if isinstance(model_or_folder, Bundle):
        return model_or_folder
    return open_bundle(model_or_folder)
