"""Bundles built on this machine instead of downloaded (the toy model), cached once.

A registry entry with a ``builder`` is built by a :class:`LocalBuilder` (``build(folder)`` and
``definition_digest()``) that the caller passes in: the toy's is
:mod:`napari_sam3_onnx.toy.bundle`, which the workflows layer
(:func:`napari_sam3_onnx.api.bundle_fetch.local_builder`) imports and hands down, so this module
knows no builder by name and imports none. The bundle lives in ``<root>/<digest[:16]>`` (default
root: the entry's :func:`~.registry.bundle_dir`): it is built in a temporary sibling folder and
renamed into place, so a folder under that name is always complete, two processes never see a
half-written one, and an unchanged definition is built once. Builds of older definitions beside
it are removed only when they are certainly ours and untouched: a folder named by a digest,
holding the marker :data:`MARKER` written by the build, and exactly the files that marker lists.
A copy of the toy (under another name, or with a note of the user's added) is never removed.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

from .errors import Sam3OnnxError
from .registry import BundleSpec, bundle_dir

DIGEST_CHARS = 16
#: Written by a build into its folder: the folder's own name and the files the build made.
MARKER = ".napari-sam3-onnx-build.json"


class LocalBuilder(Protocol):
    """What builds a bundle on this machine (e.g. the module :mod:`napari_sam3_onnx.toy.bundle`)."""

    def build(self, folder: Path) -> Path:
        """Write the bundle's files into ``folder`` (it exists and is empty) and return it."""
        ...

    def definition_digest(self) -> str:
        """Hex digest of everything the bundle is built from (a new one: a new build)."""
        ...


def _mark(folder: Path, name: str) -> None:
    """Record, inside a finished build, its final folder name and every file it holds."""
    files = sorted(p.name for p in folder.iterdir())
    (folder / MARKER).write_text(json.dumps({"folder": name, "files": files}), encoding="utf-8")


def _is_our_untouched_build(folder: Path) -> bool:
    """A build this module made, under its own name, with nothing added or removed."""
    if not re.fullmatch(f"[0-9a-f]{{{DIGEST_CHARS}}}", folder.name) or folder.is_symlink():
        return False
    try:
        mark = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        present = sorted(p.name for p in folder.iterdir() if p.name != MARKER)
        plain = all(p.is_file() and not p.is_symlink() for p in folder.iterdir())
    except (OSError, ValueError):
        return False
    return (isinstance(mark, dict) and mark.get("folder") == folder.name
            and mark.get("files") == present and plain)


def local_bundle_dir(
    spec: BundleSpec, builder: LocalBuilder, root: Path | str | None = None
) -> Path:
    """Folder the current definition of ``spec`` (built by ``builder``) is (or will be) built in."""
    digest = builder.definition_digest()[:DIGEST_CHARS]
    return (Path(root) if root is not None else bundle_dir(spec.id)) / digest


def build_local_bundle(
    spec: BundleSpec, builder: LocalBuilder, root: Path | str | None = None
) -> Path:
    """Return the cached build of ``spec``, building it first if there is none.

    Parameters
    ----------
    spec : BundleSpec
        A registry entry with a ``builder``.
    builder : LocalBuilder
        What builds it (:func:`napari_sam3_onnx.api.bundle_fetch.local_builder` finds it).
    root : Path or str, optional
        Folder holding the builds (default: ``bundle_dir(spec.id)``).

    Returns
    -------
    Path
        The complete bundle folder ``<root>/<digest>``.

    Raises
    ------
    Sam3OnnxError
        The folder cannot be written.
    """
    folder = local_bundle_dir(spec, builder, root)
    if folder.is_dir():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.building-", dir=folder.parent))
    except OSError as exc:
        raise Sam3OnnxError(f"Cannot write the {spec.title} into {folder.parent}: {exc}") from exc
    try:
        builder.build(tmp)
        _mark(tmp, folder.name)
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
    """Remove builds of older definitions beside ``current`` (untouched builds of ours only)."""
    for other in current.parent.iterdir():
        if other != current and other.is_dir() and _is_our_untouched_build(other):
            shutil.rmtree(other, ignore_errors=True)
