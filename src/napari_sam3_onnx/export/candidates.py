"""Which int8 variant ships: candidates tried fastest first, the first the gate passes is kept.

``--precision int8`` does not trust one recipe: each of :data:`CANDIDATES` is written to a
private folder next to the output, run through the decision gate (:mod:`.gate`, stopping at
the first failing stage) and removed again, until one passes; that one becomes the output
folder (one rename, so a half-written bundle never carries the user's name). The manifest's
``int8_search`` records every candidate tried with its gate figures, so a user sees what the
bundle gave up and why. Measured on this project's machines (docs/export.md):

* ``all``: both encoders' linear layers in int8 arithmetic (``dynamic``, u8 weights) -
  1.34x the fp32 image encoder at full depth on AVX2, a third of the bytes; on random weights
  it fails the gate (near-zero mask logits move);
* ``weights``: both encoders' weights stored int8 (blocks of 32, ``weight-only``) and widened
  to fp32 for fp32 arithmetic - a third of the bytes, the least int8 error, 0.84x fp32's
  speed on AVX2;
* ``half``: the image encoder's weights stored fp16 (float16 rounding only, cast to fp32 when
  the session loads), the language encoder's int8 - fp32 speed and memory, about half the
  bytes;
* ``text``: the language encoder's weights alone in int8; the image encoder is fp32's own file,
  so clicks and propagation are fp32's, and only the text side can change.

Needs ``onnx`` and ``onnxruntime`` only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .gate import compare
from .manifest import write_manifest
from .variants import to_int8


@dataclass(frozen=True)
class Candidate:
    """One int8 recipe: the quantisation method of each converted graph (manifest role)."""

    name: str
    methods: Mapping[str, str]
    what: str


#: Fastest first; the search keeps the first that passes the gate.
CANDIDATES = (
    Candidate("all", {"image_encoder": "dynamic", "language_encoder": "dynamic"},
              "both encoders in int8 arithmetic"),
    Candidate("weights", {"image_encoder": "weight-only", "language_encoder": "weight-only"},
              "both encoders' weights int8, fp32 arithmetic"),
    Candidate("half", {"image_encoder": "fp16-storage", "language_encoder": "weight-only"},
              "the image encoder's weights fp16, the language encoder's int8; fp32 arithmetic"),
    Candidate("text", {"language_encoder": "weight-only"},
              "the language encoder's weights int8, fp32 arithmetic; image encoder fp32"),
)


def search_int8(fp32: Path | str, out: Path | str, reference: dict, *,
                candidates: Sequence[Candidate] = CANDIDATES, keep_failed: bool = False,
                judge: Callable[..., dict] | None = None,
                log: Callable[[str], None] = print, **int8_options) -> dict:
    """Write the first of ``candidates`` that passes the gate to ``out``; return its record.

    Parameters
    ----------
    fp32, out
        The fp32 bundle and the output folder (absent or empty; nothing else is touched:
        candidates are built in a private temporary folder beside ``out``).
    reference
        ``gate.decisions`` of ``fp32`` (made once for every candidate).
    keep_failed
        When none passes, keep the first (fastest) candidate at ``out``, marked failed.
    judge
        ``compare(reference, folder, fail_fast=True)`` by default (a test may pass its own).
    int8_options
        Passed to :func:`.precision.to_int8` (``token_table``, ``weights``, ``exclude``,
        ``last_blocks``).

    Returns
    -------
    dict
        ``{"chosen": name or None, "tried": [{"candidate", "what", "passed", "checks",
        "summary", "bytes"}, ...]}``; the same record is in the output's manifest
        (``int8_search``) when a bundle is written.
    """
    fp32, out = Path(fp32), Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty: name a new folder")
    judge = judge or (lambda ref, folder: compare(ref, folder, fail_fast=True))
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.candidates-", dir=out.parent))
    record: dict = {"chosen": None, "tried": []}
    fallback: tuple[Path, dict, dict] | None = None
    converted: dict[tuple[str, str], tuple[Path, dict]] = {}  # (role, method) -> file, record
    try:
        for cand in candidates:
            folder = work / cand.name
            log(f"int8 candidate {cand.name!r}: {cand.what}")
            reuse = {role: converted[role, m] for role, m in cand.methods.items()
                     if (role, m) in converted}
            if reuse:
                log(f"  reusing the {', '.join(reuse)} of an earlier candidate")
            manifest = to_int8(fp32, folder, list(cand.methods), method=dict(cand.methods),
                               prebuilt=reuse, **int8_options)
            _keep_conversions(work, folder, cand, manifest, converted)
            result = judge(reference, folder)
            size = sum(f["bytes"] for f in manifest["files"].values())
            record["tried"].append({"candidate": cand.name, "what": cand.what,
                                    "passed": result["passed"], "checks": result["checks"],
                                    "workflows": result.get("workflows"),
                                    "summary": result["summary"], "bytes": size})
            log(f"  gate {'passed' if result['passed'] else 'failed'}: {result['checks']} "
                f"{result['summary']} ({size / 1e9:.2f} GB)")
            if result["passed"]:
                record["chosen"] = cand.name
                _finish(folder, out, manifest, result, record)
                return record
            if keep_failed and fallback is None:
                fallback = (folder, manifest, result)
            else:
                shutil.rmtree(folder)
        if fallback is not None:
            _finish(fallback[0], out, fallback[1], fallback[2], record)
        return record
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _keep_conversions(work: Path, folder: Path, cand: Candidate, manifest: dict,
                      converted: dict[tuple[str, str], tuple[Path, dict]]) -> None:
    """Keep the graphs ``cand`` converted for later candidates with the same role and method.

    Hard links into ``work/converted`` (copies across file systems), removed with ``work``.
    """
    store = work / "converted"
    store.mkdir(exist_ok=True)
    for role, method in cand.methods.items():
        if (role, method) in converted:
            continue
        name = manifest["graphs"][role]
        kept = store / f"{role}.{method}.onnx"
        try:
            os.link(folder / name, kept)
        except OSError:
            shutil.copyfile(folder / name, kept)
        converted[role, method] = (kept, manifest["int8"]["graphs"][role])


def _finish(folder: Path, out: Path, manifest: dict, result: dict, record: dict) -> None:
    """Record the gate and the search in ``folder``'s manifest, then move it to ``out``."""
    manifest["decision_gate"] = result
    manifest["int8_search"] = record
    write_manifest(folder, manifest, rehash=False)
    if out.exists():
        out.rmdir()  # empty (checked before the search started)
    folder.rename(out)
