"""Convert a bundle's fp32 graphs to int8 in this CPU's format, per workflow, into a new folder.

``napari-sam3-onnx convert BUNDLE`` runs this module (``python -m
napari_sam3_onnx.export.convert BUNDLE OUT``) for a bundle whose int8 format is slow or inexact
on this CPU (full-range s8 on a CPU without VNNI saturates; u8 on a VNNI CPU is slower than s8,
:func:`~napari_sam3_onnx.models.cpu_features.int8_format_warning`). It needs ``onnx`` and
``onnxruntime`` (the quantiser is onnxruntime's), never torch.

* The source is the bundle's **fp32 graphs**: an fp32 bundle, or the fp32 graphs of a
  per-workflow bundle (:mod:`.workflow_bundle`); an int8-only bundle has none and is refused.
* The user's bundle folder is only read: the work happens in ``OUT.partial`` beside ``OUT``,
  renamed to ``OUT`` when done (removed on failure); ``OUT`` inside the bundle is refused.
* ``--verdicts gate`` (default) gates the new int8 graphs against the fp32 ones workflow by
  workflow (minutes per workflow at full depth); ``--verdicts reuse`` takes the bundle's own
  recorded verdicts instead (they were measured with the bundle's own int8 format: the
  manifest says so).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..models.workflow_precision import BF16_KEY, KEY, read_plan
from .manifest import read_manifest, write_manifest


class ConvertError(ValueError):
    """The bundle cannot be converted (no fp32 graphs, no verdicts to reuse, a bad output)."""


def fp32_files(bundle: Path) -> tuple[dict, list[str]]:
    """The bundle's manifest as an fp32 bundle, and the files that make it up.

    Raises
    ------
    ConvertError
        Not an ``nso-sam3`` bundle, or one without fp32 graphs.
    """
    manifest = read_manifest(bundle)
    if manifest.get("layout") != "nso-sam3":
        raise ConvertError(f"{bundle} is not an nso-sam3 bundle (this project's export): only "
                           "those record what a conversion needs")
    plan = read_plan(bundle)
    if plan is None and manifest.get("precision") != "fp32":
        raise ConvertError(f"{bundle} holds no fp32 graphs to convert from (precision: "
                           f"{manifest.get('precision')!r}); export it again with the wanted "
                           "--int8-weights")
    extra = set() if plan is None else {f for role in ("image_encoder", "memory_attention")
                                        for f in plan.files(role)[1:]}
    files = [n for n in manifest["files"] if n not in extra]
    fp32 = {k: v for k, v in manifest.items()
            if k not in (KEY, BF16_KEY, "decision_gate", "int8", "int8_search")}
    fp32.update(precision="fp32", files={n: manifest["files"][n] for n in files})
    return fp32, files


def _view(bundle: Path, into: Path) -> Path:
    """A read-only view of the bundle's fp32 graphs: links to its files, an fp32 manifest."""
    manifest, files = fp32_files(bundle)
    into.mkdir(parents=True)
    for name in files:
        (into / name).symlink_to((bundle / name).resolve())
    (into / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return into


def check_output(bundle: Path, out: Path) -> None:
    """Refuse an output inside the bundle folder, or one that exists and is not empty."""
    src, dst = bundle.resolve(), out.resolve()
    if dst == src or src in dst.parents:
        raise ConvertError(f"{out} is inside the bundle folder {bundle}: name a folder outside "
                           "it (the bundle is never written to)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConvertError(f"{out} exists and is not empty: name a new folder")
    if Path(str(out) + ".partial").exists():
        raise ConvertError(f"{out}.partial exists (an earlier conversion?): remove it first")


def reused_verdicts(bundle: Path) -> dict:
    """The bundle's own per-workflow verdicts (``--verdicts reuse``).

    Raises
    ------
    ConvertError
        The bundle records none.
    """
    gate = read_manifest(bundle).get("decision_gate")
    workflows = gate.get("workflows") if isinstance(gate, dict) else None
    if not isinstance(workflows, dict):
        raise ConvertError(f"{bundle} records no per-workflow gate verdicts to reuse: run "
                           "with --verdicts gate")
    return workflows


def convert(bundle: Path, out: Path, weights: str = "auto", verdicts: str = "gate",
            reference_cache: Path | None = None) -> int:
    """Write the per-workflow int8 bundle of ``bundle``'s fp32 graphs at ``out``.

    Returns 0 when at least one workflow runs int8, 1 when none does (nothing is written).
    """
    from .precision import add_precision_arguments, run_precision
    from .variants import to_int8
    from .workflow_bundle import compose

    bundle, out = Path(bundle), Path(out)
    check_output(bundle, out)
    reuse = reused_verdicts(bundle) if verdicts == "reuse" else None
    old_format = (read_manifest(bundle).get("int8") or {}).get("weights")
    partial = Path(str(out) + ".partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.is_dir() else None) as tmp:
        view = _view(bundle, Path(tmp) / "fp32")
        try:
            if reuse is None:
                p = argparse.ArgumentParser()
                add_precision_arguments(p)
                argv = ["--precision", "int8", "--int8-weights", weights]
                if reference_cache is not None:
                    argv += ["--reference-cache", str(reference_cache)]
                code = run_precision(p.parse_args(argv), view, partial)
            else:
                code = _reusing(view, partial, weights, reuse, old_format, to_int8, compose)
            if code != 0:
                shutil.rmtree(partial, ignore_errors=True)
                return code
            manifest = read_manifest(partial)
            manifest["converted_from"] = {"bundle": str(bundle.resolve()),
                                          "verdicts": "gated" if reuse is None else
                                          f"reused from the bundle ({old_format} weights)"}
            write_manifest(partial, manifest, rehash=False)
            partial.rename(out)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return 0


def _reusing(view: Path, partial: Path, weights: str, reuse: dict, old_format: str | None,
             to_int8, compose) -> int:
    """The per-workflow bundle with the bundle's own verdicts (no gate run)."""
    from .precision import int8_weights_for

    fmt, _ = int8_weights_for(weights)
    converted = [r for r in ("image_encoder", "memory_attention")
                 if r in read_manifest(view)["graphs"]]
    to_int8(view, partial, converted, weights=fmt)
    manifest = compose(view, partial, reuse, converted)
    manifest["decision_gate"] = {"workflows": reuse, "reused": True,
                                 "note": f"verdicts measured on the source bundle's own int8 "
                                         f"graphs ({old_format} weights), not on these"}
    write_manifest(partial, manifest, rehash=False)
    return 0 if any(r["precision"] == "int8" for r in manifest[KEY].values()) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (``napari-sam3-onnx convert`` runs it); exit 2 on a refused input."""
    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export.convert")
    p.add_argument("bundle", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--int8-weights", choices=("auto", "s8", "u8", "s8-7bit"), default="auto")
    p.add_argument("--verdicts", choices=("gate", "reuse"), default="gate")
    p.add_argument("--reference-cache", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        code = convert(args.bundle, args.out, args.int8_weights, args.verdicts,
                       args.reference_cache)
    except ConvertError as exc:
        print(f"error: {exc}")
        return 2
    print(f"wrote {args.out}" if code == 0 else
          "no workflow kept fp32's decisions in int8: nothing was written")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
