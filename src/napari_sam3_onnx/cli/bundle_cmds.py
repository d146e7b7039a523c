"""Sub-commands about bundles and the runtime: list, fetch, inspect, doctor."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import textwrap
from importlib import metadata
from pathlib import Path

from ..models.errors import DownloadError, Sam3OnnxError
from ..models.registry import KNOWN_BUNDLES, get_bundle, home_dir
from .progress import FileBars

EXIT_BAD_INPUT = 2
#: Environment variable naming a Hugging Face mirror (as huggingface_hub reads it).
ENDPOINT_ENV = "HF_ENDPOINT"


def cmd_list(args: argparse.Namespace) -> int:
    """Print every registered bundle with its capabilities and whether it is on disk."""
    from ..models.registry import bundle_dir

    rows = [("id", "capabilities", "precision", "download", "on disk")]
    for spec in KNOWN_BUNDLES:
        rows.append((spec.id, ",".join(sorted(spec.capabilities)), spec.precision,
                     "yes" if spec.downloadable else "by hand", _on_disk(bundle_dir(spec.id))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if args.verbose:
        for spec in KNOWN_BUNDLES:
            print(f"\n{spec.id}: {spec.title}\n  licence: {spec.licence_name} "
                  f"({spec.licence_url})\n  {spec.notes}")
    print(f"\nbundles live in {home_dir() / 'models'} (set NAPARI_SAM3_ONNX_HOME to move them)")
    return 0


def _on_disk(folder: Path) -> str:
    """``yes``, ``no`` or why the folder cannot be looked at (one bad folder stops nothing)."""
    try:
        return "yes" if folder.is_dir() and any(folder.iterdir()) else "no"
    except PermissionError:
        return "unreadable (permission denied)"
    except OSError as exc:
        return f"unreadable ({exc.strerror or type(exc).__name__})"


def cmd_fetch(args: argparse.Namespace) -> int:
    """Download a registered bundle with a progress bar; 2 when the download fails."""
    from ..api.bundle_fetch import fetch_bundle

    spec = get_bundle(args.id)
    bars = FileBars(quiet=args.quiet)
    try:
        folder = fetch_bundle(spec, args.dest, bars, args.token, endpoint=args.endpoint,
                              retries=args.retries)
    except DownloadError as exc:
        bars.close()
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        bars.close()
    print(f"{spec.id}: verified, in {folder}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    """Recognise a bundle folder and print its geometry and capabilities."""
    from ..models.bundle import open_adapter

    adapter = open_adapter(args.folder)
    print(f"layout:       {adapter.layout}")
    if adapter.encoder_kind:
        print(f"encoder:      {adapter.encoder_kind}")
    print(f"input size:   {adapter.input_size[0]} x {adapter.input_size[1]} (rows x cols)")
    print(f"mask size:    {adapter.mask_size[0]} x {adapter.mask_size[1]}")
    caps = ", ".join(sorted(c.value for c in adapter.capabilities))
    print(f"capabilities: {caps}")
    _print_cpu_path(Path(args.folder))
    _print_bf16(Path(args.folder), getattr(adapter, "routes_bf16", False))
    found = adapter.assumptions()
    if found:
        print("assumptions (value  [source]):")
        width = max(len(name) for name in found)
        for name, (value, source) in found.items():
            print(f"  {name:<{width}}  {value}  [{source}]")
    return 0


def _print_cpu_path(folder: Path) -> None:
    """The bundle's precision, int8 format and per-workflow gate verdicts, for ``inspect``."""
    from ..models.cpu_features import bundle_int8_weights, cpu_features, int8_format_warning
    from ..models.gate_verdicts import WORKFLOW_WORDS, workflow_verdicts
    from ..models.workflow_precision import WorkflowPlanError, read_plan

    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    precision = manifest.get("precision") if isinstance(manifest, dict) else None
    if precision:
        print(f"precision:    {precision}")
    weights = bundle_int8_weights(folder)
    if weights:
        warning = int8_format_warning(weights, cpu_features())
        print(f"int8 weights: {weights}" + (f" ({warning})" if warning else ""))
    verdicts = workflow_verdicts(folder)
    try:
        plan = read_plan(folder)
    except WorkflowPlanError as exc:
        print(f"precision per workflow: unreadable ({exc})")
        return
    if plan is not None:
        _print_plan(plan, verdicts)
        return
    if verdicts is None:
        return
    words = {True: "passes (fp32's decisions)", False: "FAILS: use the fp32 bundle",
             None: "not gated: use the fp32 bundle"}
    print("decision gate against fp32, per workflow:")
    for key, name in WORKFLOW_WORDS:
        print(f"  {name:<17} {words[verdicts[key]]}")


def _print_bf16(folder: Path, per_workflow: bool) -> None:
    """What the "OpenVINO CPU bf16" device computes in bf16 for each workflow, and why."""
    from ..models.openvino_runtime import OPENVINO_BF16, openvino_devices
    from ..models.workflow_precision import WORKFLOWS, read_bf16

    grants = read_bf16(folder)
    if grants.verdicts is None:
        if OPENVINO_BF16 in openvino_devices():  # else nothing to say to this machine
            print(f"OpenVINO CPU bf16: {grants.note()}")
        return
    if not per_workflow and not grants.workflow_bf16(None):
        print("OpenVINO CPU bf16: this layout runs one arithmetic for all workflows and not "
              "every bf16 verdict passed: every workflow runs f32")
        return
    words = {True: "bf16 gate passed", False: "bf16 gate failed", None: "bf16 not gated"}
    print("OpenVINO CPU bf16 per workflow (the image encoder, and propagation's memory "
          "attention; other graphs f32):")
    for key, name in WORKFLOWS:
        arithmetic = "bf16" if grants.workflow_bf16(key) else "f32"
        print(f"  {name:<17} {arithmetic:<5} ({words[grants.verdicts.get(key)]})")
    if any(grants.workflow_bf16(k) for k, _ in WORKFLOWS) and not grants.workflow_bf16(None):
        print("note: a plane used by workflows of both arithmetics is encoded once in each; "
              "an embedding store runs f32")


def _print_plan(plan, verdicts: dict | None) -> None:
    """Which workflow runs at which precision, on which graph files, and why."""
    from ..models.workflow_precision import WORKFLOW_OF, WORKFLOWS

    words = {True: "gate passed", False: "gate failed", None: "not gated"}
    print("precision per workflow (the manifest's grants; an embedding store: fp32 for all):")
    for key, name in WORKFLOWS:
        need = next(n for n, w in WORKFLOW_OF.items() if w == key)
        roles = ("image_encoder", "memory_attention") if key == "propagation" else (
            "image_encoder",)
        files = [f for f in (plan.file_for(need, r) for r in roles) if f]
        verdict = words[None if verdicts is None else verdicts.get(key)]
        print(f"  {name:<17} {plan.precision.get(key, 'fp32'):<5} {', '.join(files)} "
              f"({verdict})")
    if note := plan.double_encode_note():
        print(f"note: {note}")


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
    except PermissionError:
        return f"{folder.name}: unreadable (permission denied); skipped"
    except Sam3OnnxError as exc:
        layout = f"not recognised ({str(exc).split('. ')[0]})"
    except OSError as exc:
        return f"{folder.name}: unreadable ({exc.strerror or exc}); skipped"
    if spec is None:
        return f"{folder.name}: not a registered id; layout {layout}"
    try:
        problems = verify_folder(spec, folder, check_hashes=hashes)
    except OSError as exc:
        return f"{folder.name}: unreadable ({exc.strerror or exc}); skipped"
    how = "sizes and SHA-256 checked" if hashes else "sizes checked (--hashes to hash)"
    if not problems:
        return f"{folder.name}: ok, layout {layout}, {len(spec.files)} files, {how}"
    return f"{folder.name}: {len(problems)} problem(s): " + "; ".join(map(str, problems))


def _openvino_line() -> str:
    """The OpenVINO version and the devices it offers here, or how to install it."""
    from ..models.openvino_runtime import openvino_devices, openvino_installed, openvino_version

    if not openvino_installed():
        return "not installed (optional: pip install 'napari-sam3-onnx[openvino]')"
    version = openvino_version()
    if version is None:
        return "installed but cannot be imported (reinstall it)"
    devices = openvino_devices()
    bf16 = ("; bf16 runs only the workflows a bundle's bf16 gate verdicts pass (inspect "
            "shows them), f32 elsewhere" if len(devices) > 1
            else "; no bf16 (the CPU has neither AVX512_BF16 nor AMX)")
    return f"{version}; devices: {', '.join(devices)}{bf16}"


def cmd_doctor(args: argparse.Namespace) -> int:
    """Versions, execution providers, the CPU path and the integrity of every bundle found."""
    import onnxruntime as ort

    from .. import __version__
    from ..models.cpu_features import (
        best_int8_format,
        bundle_int8_weights,
        convert_offer,
        cpu_features,
        int8_format_warning,
    )
    from ..models.openvino_runtime import OPENVINO_BF16, openvino_devices
    from ..models.runtime import available_providers, resolve_providers
    from ..models.workflow_precision import read_bf16

    print(f"napari-sam3-onnx {__version__} on Python {platform.python_version()} "
          f"({platform.system()} {platform.machine()})")
    print(f"onnxruntime {ort.__version__}")
    for dist in ("numpy", "zarr", "tifffile", "tokenizers", "dask", "distributed", "napari"):
        print(f"  {dist:<12} {_version(dist)}")
    print(f"available providers: {', '.join(available_providers())}")
    print(f"'auto' uses:         {', '.join(resolve_providers('auto'))}")
    cpu = cpu_features()
    print(f"CPU:                 {cpu.summary()}")
    print(f"int8 weights for it: {best_int8_format(cpu) if cpu.known else 'u8 (flags unknown)'}")
    print(f"OpenVINO:            {_openvino_line()}")
    bf16 = OPENVINO_BF16 in openvino_devices()  # then each bundle's bf16 record is named
    roots = [home_dir() / "models", *(Path(r) for r in args.root or [])]
    bad = 0
    for root in roots:
        try:
            folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        except OSError as exc:
            print(f"bundles in {root}: unreadable ({exc.strerror or exc}); skipped")
            bad += 1
            continue
        print(f"bundles in {root}: {len(folders) or 'none'}")
        for folder in folders:
            line = _bundle_report(folder, args.hashes)
            bad += any(w in line for w in ("problem", "not recognised", "unreadable"))
            print(f"  {line}")
            if warning := int8_format_warning(bundle_int8_weights(folder), cpu):
                print(f"    int8 on this CPU: {warning}")
                if offer := convert_offer(folder, cpu, home_dir()):
                    print(f"    convert: {offer}")
            if bf16 and (grants := read_bf16(folder)).verdicts is not None:
                print(f"    OpenVINO CPU bf16: {grants.words()}")
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
                       "Download every file of a registered bundle through huggingface_hub "
                       "into your Hugging Face cache ($HF_HOME, shared with other tools; the "
                       "bundle folder links to it), or into --dest. Each file is checked (an "
                       "ONNX header for .onnx, the published size and SHA-256, or the hash "
                       "recorded at the first download) before the bundle uses it.\n"
                       "Gated repositories take --token, $HF_TOKEN or 'hf auth login'; "
                       "$HF_ENDPOINT (or --endpoint) names a mirror; with $HF_HUB_OFFLINE=1 "
                       "only cached files are used. If the download fails the message says "
                       "which files to place by hand and where; exit code 2."),
                       epilog="example: napari-sam3-onnx fetch hf-tracker")
    p.add_argument("id", help="bundle id (see 'napari-sam3-onnx list')")
    p.add_argument("--dest", type=Path, help="fetch the files into this folder instead of the "
                   "Hugging Face cache (default: the cache, linked from <home>/models/<id>)")
    p.add_argument("--token", help="Hugging Face access token for gated repos (or $HF_TOKEN)")
    p.add_argument("--endpoint", help=f"Hugging Face mirror URL (or ${ENDPOINT_ENV})")
    p.add_argument("--retries", type=int, default=0, help="extra attempts per file after "
                   "huggingface_hub's own retries (default 0)")
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
