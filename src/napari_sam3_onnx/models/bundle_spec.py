"""What one registered bundle is: its files, source, licence and capabilities."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Capability

#: Environment variable that moves the plugin's data folder (models live in ``<home>/models``).
HOME_ENV = "NAPARI_SAM3_ONNX_HOME"

#: Layout ids; each has (or will have) one adapter in :mod:`.adapters`.
LAYOUTS = frozenset(
    {
        "wkentaro-v0.3",
        "wkentaro-v0.6",
        "samexporter-0.5",
        "hf-tracker",
        "pagarcia-tracker",
        "autognosi-int8",
        "jax-video",
        "comicapp-sam3.1",
        "hf-sam3",
        "pixl-sam3",
        "wkentaro-v0.2",
    }
)

#: Capability strings a bundle may claim (the values of :class:`~.base.Capability`).
CAPABILITIES = frozenset(c.value for c in Capability)

SAM_LICENSE = "SAM License"
#: Meta's SAM License as published with the upstream code; it governs every SAM 3 derivative.
SAM_LICENSE_URL = "https://github.com/facebookresearch/sam3/blob/main/LICENSE"

HF = "https://huggingface.co"


@dataclass(frozen=True)
class FileSpec:
    """One file of a bundle.

    Attributes
    ----------
    name : str
        File name inside the bundle folder (flat: graphs and their external data side by side).
    url : str
        Where to download it; ``""`` if it is not published and must be placed by hand.
    sha256 : str or None
        Published lower-case hex SHA-256; None if the publisher states none.
    size : int or None
        Published size in bytes; None if not stated exactly.
    """

    name: str
    url: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class BundleSpec:
    """One public SAM 3 ONNX export: files, provenance, licence and capabilities.

    Attributes
    ----------
    id : str
        Registry key and folder name.
    title : str
        Human-readable name for menus.
    layout : str
        One of :data:`LAYOUTS`; selects the adapter.
    files : tuple of FileSpec
        Files to place in the bundle folder.
    source_repo : str
        Hugging Face repo id the files come from (``""`` if not published on a hub).
    revision : str
        Pinned hub revision (commit) used in every ``url``; ``"main"`` where none is pinned.
    licence_name, licence_url : str
        Licence of the weights and where to read it.
    capabilities : frozenset of str
        Subset of :data:`CAPABILITIES`.
    precision : str
        Storage precision of the weights ("fp32", "fp16", "int8", "mixed").
    notes : str
        Sources, caveats and what is not known (unpublished hashes, unpinned revisions).
    gated : bool
        True if the hub requires accepting a licence and an access token.
    other_sources : tuple of str
        Further Hugging Face repos some of the files come from (a folder assembled from
        several exports, e.g. a dual encoder with another export's memory graphs).
    builder : str
        Which builder makes the bundle on this machine instead of downloading it (``""`` for a
        download; ``"toy"``: :mod:`napari_sam3_onnx.toy.bundle`). The workflows layer maps the
        name to the builder (:func:`napari_sam3_onnx.api.bundle_fetch.local_builder`) and
        :mod:`~napari_sam3_onnx.models.local_bundles` caches the build.
    """

    id: str
    title: str
    layout: str
    files: tuple[FileSpec, ...]
    source_repo: str
    revision: str
    licence_name: str
    licence_url: str
    capabilities: frozenset[str]
    precision: str
    notes: str
    gated: bool = False
    builder: str = ""
    other_sources: tuple[str, ...] = ()

    @property
    def page_url(self) -> str:
        """The hub page of the pinned revision (``""`` if not on a hub)."""
        if not self.source_repo:
            return ""
        return f"{HF}/{self.source_repo}/tree/{self.revision}"

    @property
    def downloadable(self) -> bool:
        """Whether :func:`~.download.download_bundle` can produce every file."""
        return bool(self.builder) or (bool(self.files) and all(f.url for f in self.files))


class UnknownBundleError(KeyError):
    """No bundle with the requested id is registered."""

    def __init__(self, bundle_id: str, known: tuple[str, ...]) -> None:
        self.bundle_id = bundle_id
        self.known = known
        super().__init__(bundle_id)

    def __str__(self) -> str:
        return f"Unknown model bundle {self.bundle_id!r}. Known bundles: {', '.join(self.known)}."
