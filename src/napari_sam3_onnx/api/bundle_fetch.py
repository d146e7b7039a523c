"""Fetch a registered bundle: download it, or build it here when the registry says so (the toy).

One path for ``napari-sam3-onnx fetch``, the dock's download menu and ``--test-bundle``, and for
:func:`~napari_sam3_onnx.api.bundles.resolve_bundle`. The toy model's builder is production code
(:mod:`napari_sam3_onnx.toy`), imported here by an ordinary import when a toy is built (not when
this module is imported: it needs ``onnx``, and the plugin starts without it), and handed down to
:func:`~napari_sam3_onnx.models.local_bundles.build_local_bundle`, which caches the build.
"""

from __future__ import annotations

from pathlib import Path

from ..models.download import download_bundle
from ..models.errors import Sam3OnnxError
from ..models.hub_fetch import Progress
from ..models.local_bundles import LocalBuilder, build_local_bundle
from ..models.registry import BundleSpec

#: The builders the registry's ``builder`` field may name.
BUILDERS = ("toy",)


def local_builder(spec: BundleSpec) -> LocalBuilder:
    """The builder of a registry entry that is built on this machine (``spec.builder``).

    Raises
    ------
    Sam3OnnxError
        The builder needs the ``onnx`` package, which is not installed (the message says what
        to install).
    ValueError
        ``spec.builder`` is not one of :data:`BUILDERS`.
    """
    if spec.builder not in BUILDERS:
        raise ValueError(f"{spec.id}: unknown builder {spec.builder!r}; known: {BUILDERS}")
    try:
        from ..toy import bundle
    except ImportError as exc:
        raise Sam3OnnxError(
            f"The {spec.title} is built with the 'onnx' package, which is not installed "
            f"({exc}). Install it with: pip install 'napari-sam3-onnx[toy]'") from exc
    return bundle


def build_here(spec: BundleSpec, root: Path | str | None = None) -> Path:
    """Return the cached build of ``spec`` (a registry entry with a ``builder``), building it first.

    ``root`` is the folder holding the builds (default: the entry's folder under the data
    folder); see :func:`~napari_sam3_onnx.models.local_bundles.build_local_bundle`.
    """
    return build_local_bundle(spec, local_builder(spec), root)


def fetch_bundle(
    spec: BundleSpec,
    dest: Path | str | None = None,
    progress: Progress | None = None,
    token: str | None = None,
    **download_options,
) -> Path:
    """Return the folder of ``spec``'s bundle: built here (the toy) or downloaded and certified.

    Parameters
    ----------
    spec : BundleSpec
        The registry entry.
    dest : Path or str, optional
        The folder to fetch into (for a built bundle: the folder holding its builds).
    progress, token, **download_options
        As :func:`~napari_sam3_onnx.models.download.download_bundle` takes them (unused when
        the bundle is built here).

    Examples
    --------
    >>> from napari_sam3_onnx.api.bundle_fetch import fetch_bundle
    >>> from napari_sam3_onnx.models.registry import get_bundle
    >>> folder = fetch_bundle(get_bundle("toy"))  # built once (needs onnx), then cached
    """
    if spec.builder:
        return build_here(spec, dest)
    return download_bundle(spec, dest, progress, token, **download_options)
