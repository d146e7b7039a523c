"""What this CPU can do fast: the instruction-set flags that decide the int8 format and bf16.

Read from ``/proc/cpuinfo`` on Linux. Elsewhere (macOS, Windows) the flags are unknown: every
function still answers, saying so, and nothing is refused because of it.

Why the flags matter (measured, docs/performance.md):

* int8 matrix products with **VNNI** (AVX-512 VNNI, AVX-VNNI, AMX) sum 8-bit products in 32 bits
  in one instruction, so full-range signed (s8) weights are exact and fastest there;
* with **AVX2 only**, onnxruntime multiplies u8 x s8 pairs into 16-bit sums that saturate for
  full-range s8 weights, so unsigned (u8) weights are the right format there;
* **bf16** arithmetic (OpenVINO's ``INFERENCE_PRECISION_HINT=bf16``) is native with
  AVX512_BF16 or AMX-BF16; without them OpenVINO emulates it slowly or refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: Flags (as /proc/cpuinfo spells them) that give 32-bit int8 dot products.
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
#: Flags that give native bf16 arithmetic.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: Flags worth printing for the CPU path (benchmarks, doctor), in this order.
REPORTED_FLAGS = ("avx2", "avx512f", *VNNI_FLAGS, *BF16_FLAGS)
#: int8 weight formats a bundle may record (``manifest.json`` ``int8_weights``).
INT8_FORMATS = ("s8", "u8", "s8-7bit")


@dataclass(frozen=True)
class CpuFeatures:
    """The CPU's model name and flags.

    Attributes
    ----------
    model : str
        The model name (``"AMD EPYC"``), ``""`` if unknown.
    flags : frozenset of str or None
        Lower-case flags of the first processor, or None where they cannot be read.
    """

    model: str = ""
    flags: frozenset[str] | None = None

    @property
    def known(self) -> bool:
        """Whether the flags could be read."""
        return self.flags is not None

    def has(self, *names: str) -> bool:
        """Whether any of ``names`` is among the flags (False when unknown)."""
        return self.flags is not None and any(n in self.flags for n in names)

    @property
    def vnni(self) -> bool:
        """32-bit int8 dot products (AVX-512 VNNI, AVX-VNNI or AMX)."""
        return self.has(*VNNI_FLAGS)

    @property
    def bf16(self) -> bool:
        """Native bf16 arithmetic (AVX512_BF16 or AMX-BF16)."""
        return self.has(*BF16_FLAGS)

    def summary(self) -> str:
        """``"AMD EPYC: avx2 avx512f avx512_vnni avx_vnni avx512_bf16"`` (or why unknown)."""
        if self.flags is None:
            return f"{self.model or 'CPU'}: flags unknown on this system"
        shown = [f for f in REPORTED_FLAGS if f in self.flags]
        return f"{self.model or 'CPU'}: {' '.join(shown) or 'none of ' + ' '.join(REPORTED_FLAGS)}"


def parse_cpuinfo(text: str) -> CpuFeatures:
    """Model name and flags of the first processor in a ``/proc/cpuinfo`` text."""
    model, flags = "", None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and flags is None:
            flags = frozenset(value.lower().split())
    return CpuFeatures(model, flags)


def cpu_features(cpuinfo: Path | str = "/proc/cpuinfo") -> CpuFeatures:
    """The CPU features of this machine (flags None where ``cpuinfo`` is missing or unreadable)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return CpuFeatures()
    return parse_cpuinfo(text)


def best_int8_format(features: CpuFeatures) -> str:
    """The int8 weight format for this CPU: ``"s8"`` with VNNI, else ``"u8"``.

    Unknown flags give ``"u8"``: it is exact everywhere, merely slower where VNNI exists.
    """
    return "s8" if features.vnni else "u8"


def int8_format_warning(fmt: str | None, features: CpuFeatures) -> str:
    """Why a bundle's int8 weight format is slow or inexact on this CPU ("" if it is not).

    Parameters
    ----------
    fmt : str or None
        The bundle's ``int8_weights`` (``"s8"``, ``"u8"``, ``"s8-7bit"``); None for a bundle
        without int8 graphs or one that does not record it.
    features : CpuFeatures
        This machine's CPU.
    """
    if fmt is None or not features.known:
        return ""
    if fmt == "s8" and not features.vnni:
        return ("this bundle's int8 weights are full-range s8, which this CPU (no VNNI) sums "
                "in 16 bits that saturate: results are inexact. Use the fp32 graphs, or "
                "re-export with --int8-weights u8.")
    if fmt in ("u8", "s8-7bit") and features.vnni:
        return (f"this bundle's int8 weights are {fmt}; this CPU has VNNI, where full-range s8 "
                "weights are faster (about 1.5x measured). Re-export with --int8-weights s8 "
                "(or auto) for speed.")
    return ""


def bundle_int8_weights(folder: Path | str) -> str | None:
    """A bundle's int8 weight format from its ``manifest.json`` (``int8.weights``).

    None for a bundle without int8 graphs, or one whose manifest does not say (registry
    bundles exported elsewhere).
    """
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = manifest.get("int8") if isinstance(manifest, dict) else None
    weights = record.get("weights") if isinstance(record, dict) else None
    return str(weights) if weights else None


def convert_target(folder: Path | str, features: CpuFeatures, data_dir: Path | str) -> Path:
    """Where ``napari-sam3-onnx convert`` writes ``folder``'s conversion for this CPU.

    ``DATA/converted/<bundle>-int8-<format>``: in the data folder, never in the bundle's own.
    """
    return Path(data_dir) / "converted" / f"{Path(folder).name}-int8-{best_int8_format(features)}"


def has_fp32_graphs(folder: Path | str) -> bool:
    """Whether the bundle holds fp32 graphs a conversion can start from.

    An fp32 bundle, or a per-workflow one (its ``graphs`` are fp32); not an int8-only one.
    """
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("layout") == "nso-sam3" and (
        manifest.get("precision") == "fp32" or isinstance(manifest.get("workflow_precision"),
                                                          dict))


def convert_offer(folder: Path | str, features: CpuFeatures, data_dir: Path | str) -> str:
    """The command that converts a bundle whose int8 format does not suit this CPU ("" if none).

    Only for a bundle with an int8 format this CPU runs slowly or inexactly
    (:func:`int8_format_warning`) that also holds fp32 graphs to convert from.
    """
    if not int8_format_warning(bundle_int8_weights(folder), features):
        return ""
    if not has_fp32_graphs(folder):
        return ""
    target = convert_target(folder, features, data_dir)
    return (f"napari-sam3-onnx convert {folder} --int8-weights auto --out {target} "
            "(int8 in this CPU's format from the bundle's fp32 graphs, gated per workflow; "
            "the bundle is not changed)")


def int8_weights_note(request: str, features: CpuFeatures) -> str:
    """``"int8 weights: s8 (auto: this CPU has VNNI)"`` for a ``--int8-weights`` request."""
    if request != "auto":
        return f"int8 weights: {request} (named)"
    why = "VNNI" if features.vnni else ("AVX2 only" if features.known else "flags unknown")
    return f"int8 weights: {best_int8_format(features)} (auto: {why})"
