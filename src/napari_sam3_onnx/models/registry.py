"""Registry of the public SAM 3 ONNX exports this plugin knows how to fetch and run.

Each :class:`BundleSpec` names one export: where its files are published (a Hugging Face repo
and a pinned revision), the file names to place in one flat folder, the SHA-256 and byte size
where the publisher (or a package that pins it) states them, the licence, and what the bundle
can do. Every fact comes from docs/layouts.md (its layouts and sources) or from the
sources named in a bundle's ``notes``; nothing here is guessed. Where no hash is published,
``sha256`` is None and :mod:`~napari_sam3_onnx.models.download` records the hash of the first
download beside the files and checks later copies against it (trust on first use).

A file with an empty ``url`` is not published anywhere; it must be produced or fetched by hand
(the bundle's ``notes`` say how). A bundle with no files has no pinned file list yet.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from platformdirs import user_cache_dir

from .bundle_spec import (
    CAPABILITIES,
    HOME_ENV,
    LAYOUTS,
    SAM_LICENSE,
    SAM_LICENSE_URL,
    BundleSpec,
    FileSpec,
    UnknownBundleError,
)
from .known_bundles import KNOWN_BUNDLES, hf_url

__all__ = [
    "CAPABILITIES",
    "HOME_ENV",
    "KNOWN_BUNDLES",
    "LAYOUTS",
    "SAM_LICENSE",
    "SAM_LICENSE_URL",
    "BundleSpec",
    "FileSpec",
    "UnknownBundleError",
    "bundle_dir",
    "get_bundle",
    "hf_url",
    "home_dir",
]


def get_bundle(bundle_id: str) -> BundleSpec:
    """Return the registered bundle ``bundle_id``.

    Raises
    ------
    UnknownBundleError
        (a ``KeyError``) no such bundle; the message lists the known ids.
    """
    for spec in KNOWN_BUNDLES:
        if spec.id == bundle_id:
            return spec
    raise UnknownBundleError(bundle_id, tuple(s.id for s in KNOWN_BUNDLES))


def home_dir(root: Path | str | None = None) -> Path:
    """The plugin's data folder: ``root``, else ``$NAPARI_SAM3_ONNX_HOME``, else the user cache."""
    if root is not None:
        return Path(root)
    env = os.environ.get(HOME_ENV)
    return Path(env) if env else Path(user_cache_dir("napari-sam3-onnx"))


def bundle_dir(bundle_id: str, root: Path | str | None = None) -> Path:
    """Folder where bundle ``bundle_id`` is stored: ``<home>/models/<bundle_id>``.

    Parameters
    ----------
    bundle_id : str
        Bundle id (need not be registered, but must be a plain folder name).
    root : Path or str, optional
        Data folder to use instead of :func:`home_dir`'s default.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", bundle_id) or ".." in bundle_id:
        raise ValueError(f"Bundle id {bundle_id!r} is not a plain folder name.")
    return home_dir(root) / "models" / bundle_id
