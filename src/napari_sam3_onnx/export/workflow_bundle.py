"""One bundle, precision per workflow: int8 graphs beside the fp32 ones, granted by the gate.

``--precision int8`` (the default ``--int8-candidates per-workflow``) converts the image encoder
and the memory attention to int8, gates that variant against fp32 workflow by workflow
(:func:`.gate.compare`, ``workflows``) and then turns the variant's folder into one bundle that
holds

* the fp32 graphs under their usual names (the manifest's ``graphs``: what every workflow ran
  before, and what a reader that knows nothing of precisions runs),
* ``image_encoder.int8.onnx`` when at least one workflow passed, and
  ``memory_attention.int8.onnx`` when propagation passed (memory attention serves propagation
  alone),
* ``workflow_precision`` in the manifest: per workflow, its precision and the file of each role
  it runs (:mod:`napari_sam3_onnx.models.workflow_precision` reads it).

A workflow is granted int8 only with a verdict of True for exactly the graphs it runs in the
bundle: clicks and boxes, text, exemplars and automatic were judged with the int8 image encoder
(they do not run the memory attention); propagation with both int8 graphs, so it gets both or
neither. The cost of a mixed bundle: the int8 encoder's bytes on disk (about a quarter of the
fp32 one), and a plane used by two workflows of different precisions is encoded twice.
Needs ``onnx`` and ``onnxruntime`` only (no torch).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..models.workflow_precision import BF16_KEY, KEY, ROLES, WORKFLOWS
from .manifest import read_manifest, write_manifest

#: The converted roles each workflow runs (the others stay fp32 for it).
WORKFLOW_ROLES = {"clicks": ("image_encoder",), "text": ("image_encoder",),
                  "exemplars": ("image_encoder",), "automatic": ("image_encoder",),
                  "propagation": ("image_encoder", "memory_attention")}


def int8_name(name: str) -> str:
    """``"image_encoder.onnx"`` -> ``"image_encoder.int8.onnx"``."""
    stem = name[:-5] if name.endswith(".onnx") else name
    return f"{stem}.int8.onnx"


def grants(verdicts: Mapping[str, bool | None], converted: Sequence[str]) -> dict[str, bool]:
    """Which workflows run int8: a True verdict and at least one converted graph to run."""
    return {key: verdicts.get(key) is True and bool(set(WORKFLOW_ROLES[key]) & set(converted))
            for key, _ in WORKFLOWS}


def _move_inline(src: Path, dst: Path) -> None:
    """Move graph ``src`` to ``dst``; a graph with external data is saved in one file."""
    from ..models.graph_info import read_signature

    if not read_signature(src).external:
        src.replace(dst)
        return
    import onnx

    onnx.save(onnx.load(str(src)), str(dst))  # int8 graphs are well under protobuf's 2 GB
    for ref in read_signature(src).external:
        (src.parent / ref.location).unlink(missing_ok=True)
    src.unlink()


def compose(fp32: Path | str, variant: Path | str, verdicts: Mapping[str, bool | None],
            converted: Sequence[str]) -> dict:
    """Turn ``variant`` (``to_int8``'s copy of ``fp32``) into the per-workflow bundle.

    Parameters
    ----------
    fp32 : Path
        The fp32 bundle the variant was made from (its converted graphs are copied back).
    variant : Path
        The int8 variant's folder, rewritten in place.
    verdicts : mapping
        The gate's ``workflows`` (True / False / None per workflow).
    converted : sequence of str
        The roles ``to_int8`` converted (a subset of :data:`~..models.workflow_precision.ROLES`).

    Returns
    -------
    dict
        The new manifest (written): ``graphs`` the fp32 files, ``workflow_precision`` the routes,
        ``int8`` the conversion record, ``precision`` in words.
    """
    fp32, variant = Path(fp32), Path(variant)
    if extra := set(converted) - set(ROLES):
        raise ValueError(f"a per-workflow bundle routes {list(ROLES)} only, not {sorted(extra)}")
    base, converted_record = read_manifest(fp32), read_manifest(variant)
    granted = grants(verdicts, converted)
    files = dict(base["files"])
    int8_files = {}
    for role in converted:
        name = base["graphs"][role]
        used = any(granted[k] and role in WORKFLOW_ROLES[k] for k in granted)
        if used:
            int8_files[role] = int8_name(name)
            _move_inline(variant / name, variant / int8_files[role])
            files[int8_files[role]] = {}
        else:
            (variant / name).unlink()
        shutil.copyfile(fp32 / name, variant / name)
    routes = {}
    for key, _ in WORKFLOWS:
        roles = [r for r in WORKFLOW_ROLES[key] if r in base["graphs"]]
        routes[key] = {"precision": "int8" if granted[key] else "fp32",
                       "graphs": {r: int8_files[r] if granted[key] and r in int8_files
                                  else base["graphs"][r] for r in roles}}
    base.pop(BF16_KEY, None)  # bf16 verdicts judged the fp32 graphs alone, not this bundle
    manifest = {**base, "files": files, KEY: routes,
                "int8": converted_record.get("int8"),
                "precision": precision_words(granted, converted_record)}
    write_manifest(variant, manifest)
    return manifest


def precision_words(granted: Mapping[str, bool], variant_manifest: Mapping) -> str:
    """``"per workflow: int8 (s8 weights) for clicks and boxes, propagation; fp32 for text"``."""
    weights = (variant_manifest.get("int8") or {}).get("weights")
    fmt = f"int8 ({weights} weights)" if weights else "int8"
    on = [w for k, w in WORKFLOWS if granted.get(k)]
    off = [w for k, w in WORKFLOWS if not granted.get(k)]
    parts = ([f"{fmt} for {', '.join(on)}"] if on else []) + (
        [f"fp32 for {', '.join(off)}"] if off else [])
    return "per workflow: " + "; ".join(parts)
