"""Sub-commands about bundles and the runtime: list, fetch, inspect, doctor."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import textwrap
from dataclasses import replace
from importlib import metadata
from pathlib import Path

from ..models.errors import DownloadError, Sam3OnnxError
from ..models.registry import KNOWN_BUNDLES, BundleSpec, get_bundle, home_dir
from .output import Bar

EXIT_BAD_INPUT = 2
HF = "https://huggingface.co"
#: Environment variable naming a Hugging Face mirror (as huggingface_hub reads it).
ENDPOINT_ENV = "HF_ENDPOINT"


def _with_endpoint(spec: BundleSpec, endpoint: str | None) -> BundleSpec:
    """``spec`` with its Hugging Face URLs pointed at a mirror (None: unchanged)."""
    if not endpoint:
        return spec
    base = endpoint.rstrip("/")
    files = tuple(replace(f, url=base + f.url[len(HF):]) if f.url.startswith(HF) else f
                  for f in spec.files)
    return replace(spec, files=files)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every registered bundle with its capabilities and whether it is on disk."""
    from ..models.registry import bundle_dir

    rows = [("id", "capabilities", "precision", "download", "on disk")]
    for spec in KNOWN_BUNDLES:
        folder = bundle_dir(spec.id)
        rows.append((spec.id, ",".join(sorted(spec.capabilities)), spec.precision,
                     "yes" if spec.downloadable else "by hand",
                     "yes" if folder.is_dir() and any(folder.iterdir()) else "no"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if args.verbose:
        for spec in KNOWN_BUNDLES:
            print(f"\n{spec.id}: {spec.title}\n  licence: {spec.licence_name} "
                  f"({spec.licence_url})\n  {spec.notes}")
    print(f"\nbundles live in {home_dir() / 'models'} (set NAPARI_SAM3_ONNX_HOME to move them)")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """Download a registered bundle with a progress bar; 2 when the download fails."""
    from ..models.download import download_bundle

    spec = _with_endpoint(get_bundle(args.id), args.endpoint or os.environ.get(ENDPOINT_ENV))
    bars = _FileBars()
    token = args.token or os.environ.get("HF_TOKEN")
    try:
        folder = download_bundle(spec, args.dest, bars, token, retries=args.retries)
    except DownloadError as exc:
        bars.close()
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        bars.close()
    print(f"{spec.id}: verified, in {folder}")
    return 0


class _FileBars:
    """One progress bar per file, the previous one closed when the next file starts."""

    def __init__(self) -> None:
        self.bar: Bar | None = None

    def __call__(self, name: str, done: int, total: int | None) -> None:
        if self.bar is None or self.bar.label != name:
            self.close()
            self.bar = Bar(name, unit="B")
        self.bar.update(done, total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def cmd_inspect(args: argparse.Namespace) -> int:
    """Recognise a bundle folder and print its geometry and capabilities."""
    from ..models.bundle import open_bundle

    adapter = open_bundle(args.folder)
    print(f"layout:       {adapter.layout}")
    print(f"input size:   {adapter.input_size[0]} x {adapter.input_size[1]} (rows x cols)")
    print(f"mask size:    {adapter.mask_size[0]} x {adapter.mask_size[1]}")
    caps = ", ".join(sorted(c.value for c in adapter.capabilities))
    print(f"capabilities: {caps}")
    found = adapter.assumptions()
    if found:
        print("assumptions (value  [source]):")
        width = max(len(name) for name in found)
        for name, (value, source) in found.items():
            print(f"  {name:<{width}}  {value}  [{source}]")
    return 0


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _bundle_report(folder: Path, hashes: bool) -> str:
    from ..models.bundle import recognise
    from ..models.download import verify_folder
    from ..models.registry import UnknownBundleError

    try:
        spec = get_bundle(folder.name)
    except UnknownBundleError:
        spec = None
    try:
        layout = recognise(folder)[0].layout
    except Sam3OnnxError as exc:
        layout = f"not recognised ({str(exc).split('.')[0]})"
    if spec is None:
        return f"{folder.name}: not a registered id; layout {layout}"
    problems = verify_folder(spec, folder, check_hashes=hashes)
    how = "sizes and SHA-256 checked" if hashes else "sizes checked (--hashes to hash)"
    if not problems:
        return f"{folder.name}: ok, layout {layout}, {len(spec.files)} files, {how}"
    return f"{folder.name}: {len(problems)} problem(s): " + "; ".join(map(str, problems))


def cmd_doctor(args: argparse.Namespace) -> int:
    """Versions, execution providers and the integrity of every bundle folder found."""
    import onnxruntime as ort

    from .. import __version__
    from ..models.runtime import available_providers, resolve_providers

    print(f"napari-sam3-onnx {__version__} on Python {platform.python_version()} "
          f"({platform.system()} {platform.machine()})")
    print(f"onnxruntime {ort.__version__}")
    for dist in ("numpy", "zarr", "tifffile", "tokenizers", "dask", "distributed", "napari"):
        print(f"  {dist:<12} {_version(dist)}")
    print(f"available providers: {', '.join(available_providers())}")
    print(f"'auto' uses:         {', '.join(resolve_providers('auto'))}")
    roots = [home_dir() / "models", *(Path(r) for r in args.root or [])]
    bad = 0
    for root in roots:
        folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        print(f"bundles in {root}: {len(folders) or 'none'}")
        for folder in folders:
            line = _bundle_report(folder, args.hashes)
            bad += "problem" in line or "not recognised" in line
            print(f"  {line}")
    return 1 if bad and args.strict else 0


def _wrap(text: str) -> str:
    """Wrap a help description to 78 columns, keeping explicit line breaks."""
    return "\n".join(textwrap.fill(line, 78) for line in text.split("\n"))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register list, fetch, inspect and doctor."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("list", help="list the known SAM 3 bundles and what each can do",
                       formatter_class=fmt,
                       description=_wrap(
                       "List every registered SAM 3 ONNX export: its id (use it with "
                       "fetch and the batch commands), capabilities (encode, clicks, boxes, text, "
                       "exemplars, memory), precision, whether it can be downloaded, and whether "
                       "it is already on disk."))
    p.add_argument("-v", "--verbose", action="store_true", help="also print licences and notes")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("fetch", help="download and verify a bundle", formatter_class=fmt,
                       description=_wrap(
                       "Download every file of a registered bundle, resuming partial "
                       "files, and verify sizes and SHA-256 hashes before a file is put in place.\n"
                       "If the download fails (offline, server error, unpublished files) the "
                       "message says which files to place by hand and where; exit code 2."),
                       epilog="example: napari-sam3-onnx fetch hf-tracker")
    p.add_argument("id", help="bundle id (see 'napari-sam3-onnx list')")
    p.add_argument("--dest", type=Path, help="target folder (default: <home>/models/<id>)")
    p.add_argument("--token", help="Hugging Face access token for gated repos (or $HF_TOKEN)")
    p.add_argument("--endpoint", help=f"Hugging Face mirror URL (or ${ENDPOINT_ENV})")
    p.add_argument("--retries", type=int, default=3, help="extra attempts per file (default 3)")
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("inspect", help="recognise a bundle folder and print what it can do",
                       formatter_class=fmt,
                       description=_wrap(
                       "Read the .onnx headers of a folder (no weights are loaded), "
                       "recognise the export layout and print its geometry and capabilities."))
    p.add_argument("folder", help="folder holding the bundle's .onnx files")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("doctor", help="versions, execution providers and bundle integrity",
                       formatter_class=fmt,
                       description=_wrap(
                       "Print the versions that matter (napari is not imported), the "
                       "onnxruntime execution providers, and check every bundle folder under "
                       "<home>/models (and --root folders) against the registry."))
    p.add_argument("--root", action="append", help="another folder of bundle folders")
    p.add_argument("--hashes", action="store_true", help="also SHA-256 every file (slow)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a bundle has problems")
    p.set_defaults(func=cmd_doctor)
