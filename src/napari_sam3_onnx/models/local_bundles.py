"""Bundles built on this machine instead of downloaded (the toy model), cached once.

A registry entry with a ``builder`` names a module with ``build(folder)`` and
``definition_digest()``. The bundle lives in ``<root>/<digest[:16]>`` (default root: the
entry's :func:`~.registry.bundle_dir`): it is built in a temporary sibling folder and renamed
into place, so a folder under that name is always complete, two processes never see a
half-written one, and an unchanged definition is built once. Builds of older definitions
beside it are removed (they are ours: only folders whose manifest says ``"toy"``).
"""

from __future__ import annotations

import importlib
import json
import shutil
import tempfile
from pathlib import Path

from .errors import Sam3OnnxError
from .registry import BundleSpec, bundle_dir

DIGEST_CHARS = 16


def _builder(spec: BundleSpec):
    try:
        return importlib.import_module(spec.builder)
    except ImportError as exc:
        raise Sam3OnnxError(
            f"The {spec.title} is built with the 'onnx' package, which is not installed "
            f"({exc}). Install it with: pip install 'napari-sam3-onnx[toy]'") from exc


def _is_local_build(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and bool(manifest.get("source", {}).get("toy"))


def local_bundle_dir(spec: BundleSpec, root: Path | str | None = None) -> Path:
    """Folder the current definition of ``spec`` is (or will be) built in."""
    digest = _builder(spec).definition_digest()[:DIGEST_CHARS]
    return (Path(root) if root is not None else bundle_dir(spec.id)) / digest


def build_local_bundle(spec: BundleSpec, root: Path | str | None = None) -> Path:
    """Return the cached build of ``spec``, building it first if there is none.

    Parameters
    ----------
    spec : BundleSpec
        A registry entry with a ``builder``.
    root : Path or str, optional
        Folder holding the builds (default: ``bundle_dir(spec.id)``).

    Returns
    -------
    Path
        The complete bundle folder ``<root>/<digest>``.

    Raises
    ------
    Sam3OnnxError
        The builder's dependencies (``onnx``) are missing, or the folder cannot be written.
    """
    module = _builder(spec)
    folder = local_bundle_dir(spec, root)
    if folder.is_dir():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.building-", dir=folder.parent))
    except OSError as exc:
        raise Sam3OnnxError(f"Cannot write the {spec.title} into {folder.parent}: {exc}") from exc
    try:
        module.build(tmp)
        try:
            tmp.rename(folder)
        except OSError:
            if not folder.is_dir():  # not a concurrent build that won the rename
                raise
    except OSError as exc:
        raise Sam3OnnxError(f"Cannot write the {spec.title} into {folder.parent}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _remove_stale(folder)
    return folder


def _remove_stale(current: Path) -> None:
    """Remove builds of older definitions beside ``current`` (toy manifests only)."""
    for other in current.parent.iterdir():
        if other != current and not other.name.startswith(".") and other.is_dir() \
                and _is_local_build(other):
            shutil.rmtree(other, ignore_errors=True)
