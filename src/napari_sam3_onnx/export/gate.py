"""The decision gate: a precision variant against its fp32 bundle, through the plugin's engine.

The same fixed scenes and prompts (:mod:`.scenes`) run through ``open_adapter`` and the engine on
both bundles; the variant passes when it makes the **same decisions**
(docs/layouts.md#judging-a-precision-change), not when its tensors are close:

* click / box prompts (:data:`CLICK_PROMPTS`, 10 of them): the same candidate and mask IoU
  >= ``click_mask_iou_min``;
* text (``"cell"``) and exemplar-box prompts: the same detections kept at score 0.5 and each
  kept mask's IoU >= ``concept_mask_iou_min``;
* propagation of one click over 8 drifting slices (both directions): mask IoU
  >= ``propagation_mask_iou_min`` on *every* slice;
* automatic segmentation (a coarse grid of clicks, :data:`AUTO_POINTS` a side): the same number
  of masks kept, and each fp32 mask matched by one with IoU >= ``automatic_mask_iou_min``.

Besides the one verdict for the whole bundle (``passed``), the result gives one verdict per
**workflow** (:data:`WORKFLOWS`, ``workflows``): clicks and boxes, text, exemplars, propagation,
automatic. They differ in practice (issue 28: on calibrated random weights int8 kept every
click, box and propagation decision and broke the detector's masks), so a bundle's manifest
records them and the plugin says which workflows its precision passed.

Each output's relative error (L2 of the difference / L2 of fp32) is reported beside the
decisions: the encoder features, click logits, detection scores and masks, tracked logits.

Needs ``onnxruntime`` and the plugin's engine only (no torch).
Usage: ``python -m napari_sam3_onnx.export.gate FP32_BUNDLE VARIANT [VARIANT ...] [--json OUT]
[--reference-cache FILE] [--device DEVICE [--record]]`` (fp32 decisions made once - and, with
``--reference-cache``, kept in FILE for later runs, keyed by the fp32 manifest's file
digests; exit 1 when a variant fails; variants are never changed, except by ``--record``).

OpenVINO's bf16 (``--device "OpenVINO CPU bf16"``, the fp32 bundle named as its own variant)
is judged per workflow the same way; ``--record`` writes those verdicts into the variant's
manifest (``openvino_bf16``), and the plugin's bf16 device then computes in bf16 only for the
workflows that passed (:class:`~napari_sam3_onnx.models.workflow_precision.Bf16Grants`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Generator, Sequence
from pathlib import Path

import numpy as np

from .gate_judge import GATES, STAGES, WORKFLOWS, judge, rel_error, workflow_verdicts

__all__ = ["CLICK_PROMPTS", "CONCEPT_PROMPTS", "GATES", "PROPAGATION_SLICES", "STAGES",
           "WORKFLOWS", "cached_decisions", "compare", "decisions", "iter_decisions", "main",
           "record_bf16", "rel_error", "workflow_verdicts"]

#: Points per side of the automatic stage's grid (coarse: the decoder runs AUTO_POINTS**2 times).
AUTO_POINTS = 6
#: (points (row, col), labels, box (r0, c0, r1, c1) or None) on ``test_image(0)``, 1008 px.
CLICK_PROMPTS: tuple[tuple[list[tuple[int, int]], list[int], tuple[int, int, int, int] | None],
                    ...] = (
    ([(510, 420)], [1], None),
    ([(510, 420), (260, 700)], [1, 0], None),
    ([(200, 220)], [1], None),
    ([(800, 760)], [1], None),
    ([(640, 300), (660, 330), (620, 280)], [1, 1, 1], None),
    ([(400, 600), (420, 640)], [1, 0], None),
    ([], [], (350, 300, 720, 640)),
    ([], [], (100, 500, 420, 900)),
    ([(540, 470)], [1], (350, 300, 720, 640)),
    ([(520, 450), (380, 330)], [1, 0], (330, 280, 740, 660)),
)
PROPAGATION_SLICES = 8
CONCEPT_PROMPTS = (("cell", None), ("visual", (0.47, 0.5, 0.3, 0.34)))
PHRASES = tuple(phrase for phrase, _ in CONCEPT_PROMPTS)


def decisions(folder: Path | str, stages: Sequence[str] = STAGES, device: str = "auto") -> dict:
    """Every decision (and the raw outputs behind it) the engine makes with one bundle.

    ``stages``: which of :data:`STAGES` to run (the encoder features are always there);
    ``device``: what runs the graphs (``"auto"``: onnxruntime's best provider;
    ``"OpenVINO CPU bf16"`` gates OpenVINO's bf16 arithmetic on the bundle's own graphs: the
    image encoder of every workflow and propagation's memory attention in bf16, the other
    graphs f32, as the plugin runs a workflow whose bf16 verdict passed).
    """
    out: dict = {}
    for _stage, partial in iter_decisions(folder, stages, device):
        out = partial
    return out


def iter_decisions(folder: Path | str, stages: Sequence[str] = STAGES, device: str = "auto"
                   ) -> Generator[tuple[str, dict], None, None]:
    """:func:`decisions` stage by stage: yields ``(stage, decisions so far)`` after each.

    One bundle opened and the test image encoded once for all stages; closing the generator
    early (a failed stage) closes the bundle.
    """
    from ..engine.concepts.search import TextCache
    from ..engine.concepts.tokenizer import ClipTokenizer
    from ..engine.interactive import Prompt, segment
    from ..engine.postprocess import logits_to_mask
    from ..models.base import Capability
    from ..models.bundle import open_adapter
    from ..models.runtime import RuntimeConfig
    from .scenes import test_image

    folder = Path(folder)
    # bf16 everywhere: the gate judges OpenVINO's bf16 for every workflow, whatever verdicts
    # the bundle already records (the plugin then runs it only where they pass)
    adapter = open_adapter(folder, RuntimeConfig(providers=device, bf16_everywhere=True))
    try:
        img = test_image(0)
        emb = adapter.encode(img)
        out: dict = {"features": {k: np.array(v) for k, v in emb.features.items()}}
        routed = _Routed(adapter, img, emb)  # a per-workflow bundle: each stage's own encoder
        for stage in (s for s in STAGES if s in stages):
            if stage == "clicks":
                out["clicks"] = []
                for pts, labs, box in CLICK_PROMPTS:
                    res = segment(adapter, routed(Capability.CLICKS), Prompt.clicks(
                        np.asarray(pts, float).reshape(-1, 2), labs, box))
                    out["clicks"].append({"candidate": res.candidate, "mask": res.mask,
                                          "logits": res.low_res_logits})
            elif stage == "concepts":
                out["concepts"] = []
                texts = TextCache(adapter, ClipTokenizer.from_folder(folder))
                for phrase, exemplar in CONCEPT_PROMPTS:
                    boxes = None if exemplar is None else np.array([exemplar], np.float32)
                    labels = None if boxes is None else np.array([1], np.int64)
                    need = Capability.TEXT if exemplar is None else Capability.EXEMPLARS
                    det = adapter.concept_detector.detect(routed(need), texts.get(phrase),
                                                          boxes, labels)
                    keep = np.flatnonzero(det.scores > 0.5)
                    out["concepts"].append({"scores": np.array(det.scores), "masks": {
                        int(i): (logits_to_mask(det.masks[i], img.shape[:2], 0.0),
                                 np.array(det.masks[i])) for i in keep}})
            elif stage == "propagation":
                out["propagation"] = _propagation(adapter)
            else:
                out["automatic"] = _automatic(adapter, img, routed(Capability.ENCODE))
            yield stage, out
    finally:
        adapter.close()


class _Routed:
    """The test image's embedding for a workflow: the encoder the bundle grants it, once each.

    A bundle with one encoder (every bundle but a per-workflow one) answers every workflow
    with the embedding already made.
    """

    def __init__(self, adapter, img: np.ndarray, default) -> None:
        self.adapter, self.img = adapter, img
        # keyed like the engine's cache: on the bf16 device every workflow's variant is
        # "<file>@bf16", the default embedding's too, so it is not encoded twice
        self.made = {adapter.encoder_variant(None): default}

    def __call__(self, need):
        variant = self.adapter.encoder_variant(need)
        if variant not in self.made:
            self.made[variant] = self.adapter.encode_for(self.img, need)
        return self.made[variant]


def _propagation(adapter) -> list:
    """(mask, low-res logits) of one click propagated over the gate's drifting slices."""
    from ..engine.encoding import SliceEncoder, refs_along_axis
    from ..engine.tracking.propagation import propagate
    from ..engine.tracking.types import Seed
    from .scenes import test_image

    n = PROPAGATION_SLICES
    frames = np.stack([test_image(1, shift=(4.0 * i, 6.0 * i)) for i in range(n)])
    refs = refs_along_axis(frames, rgb=True, source="gate")[:n]
    run = propagate(adapter, SliceEncoder(adapter), refs, {2: Seed.clicks(2, [(518, 432)])},
                    stop_after_absent=None)
    track = run.objects[2].outputs
    return [(track[k].mask, track[k].low_res_logits) for k in range(n)]


def _automatic(adapter, img: np.ndarray, emb) -> list:
    """(full-plane mask, predicted IoU) of every mask the automatic generator keeps on ``img``."""
    from ..engine.automatic.generate import generate_masks
    from ..engine.automatic.settings import AutoMaskSettings
    from ..engine.encoding import SliceRef

    ref = SliceRef(img[None], (0,), rgb=True, source="gate")
    found = generate_masks(adapter, lambda _ref: emb, ref,
                           AutoMaskSettings(points_per_side=AUTO_POINTS))
    out = []
    for m in found:
        full = np.zeros(img.shape[:2], bool)
        r0, c0, r1, c1 = m.window
        full[r0:r1, c0:c1] = m.mask
        out.append((full, float(m.score)))
    return out


def compare(fp32: Path | str | dict, other: Path | str | dict, gates: dict | None = None,
            fail_fast: bool = False, device: str = "auto") -> dict:
    """Decision-level comparison of two bundles (or their :func:`decisions`).

    ``fail_fast``: run ``other``'s stages one at a time and stop at the first that fails (the
    later checks are then None, "not run"); the exporter's candidate search uses it, since at
    full depth one stage costs minutes. Returns the measurements, the relative errors, the
    gates, ``checks`` and ``passed``.
    """
    g = {**GATES, **(gates or {})}
    a = fp32 if isinstance(fp32, dict) else decisions(fp32)
    if isinstance(other, dict) or not fail_fast:
        b = other if isinstance(other, dict) else decisions(other, device=device)
        return judge(a, b, g, PHRASES)
    result: dict = {}
    stages = iter_decisions(other, device=device)
    for stage, b in stages:
        result = judge(a, b, g, PHRASES)
        if result["checks"][stage] is False:
            stages.close()  # the later stages are not run; the bundle is closed
            break
    return result


def cached_decisions(fp32: Path, cache: Path | None) -> dict:
    """:func:`decisions` of ``fp32``, read from / written to ``cache`` if given.

    The cache (:mod:`.decision_cache`: an ``.npz`` of plain arrays, no pickle) holds the fp32
    manifest's file digests; a cache of another bundle (or of the same folder re-exported) is
    recomputed and overwritten, never used. A file at ``cache`` that is not such a cache is
    refused (:class:`.decision_cache.NotADecisionCache`) and left as it is.
    """
    from . import decision_cache
    from .manifest import read_manifest

    key = {n: f["sha256"] for n, f in read_manifest(fp32)["files"].items()}
    if cache is not None and cache.exists():
        stored_key, stored = decision_cache.load(cache)
        if stored_key == key and all(stage in stored for stage in STAGES):
            return stored  # (a cache from before a stage was added is made again)
    out = decisions(fp32)
    if cache is not None:
        decision_cache.save(cache, key, out)
    return out


def record_bf16(folder: Path | str, result: dict) -> Path:
    """Write ``result``'s per-workflow bf16 verdicts into ``folder``'s ``manifest.json``.

    Only the record (:data:`~..models.workflow_precision.BF16_KEY`) is added or replaced; the
    listed file digests are not re-measured. The manifest is a file an adapter reads, so an
    embedding store made with the bundle before is not taken for it afterwards (its identity
    is the bundle's files' content). Returns the manifest's path.
    """
    from ..models.openvino_runtime import openvino_version
    from ..models.workflow_precision import BF16_KEY, bf16_record
    from .manifest import MANIFEST, read_manifest, write_manifest

    folder = Path(folder)
    manifest = read_manifest(folder)
    manifest[BF16_KEY] = bf16_record(_plain(result), manifest, openvino_version())
    write_manifest(folder, manifest, rehash=False)
    return folder / MANIFEST


def _plain(value):
    """``value`` with numpy scalars as Python numbers (for JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: gate existing variants against their fp32 bundle, print the results."""
    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export.gate")
    p.add_argument("fp32", type=Path)
    p.add_argument("variants", type=Path, nargs="+")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--device", default="auto",
                   help="what runs the variants' graphs: auto (onnxruntime, default), "
                        "'OpenVINO CPU' or 'OpenVINO CPU bf16' (name the fp32 bundle as the "
                        "variant to gate OpenVINO's bf16 arithmetic per workflow)")
    p.add_argument("--reference-cache", type=Path, default=None,
                   help="keep the fp32 decisions in this file (.npz) for later runs")
    p.add_argument("--record", action="store_true",
                   help="with --device 'OpenVINO CPU bf16': write each variant's per-workflow "
                        "bf16 verdicts into its manifest.json (key openvino_bf16); the plugin "
                        "then runs bf16 for the workflows that pass and f32 for the others")
    args = p.parse_args(argv)
    from ..models.openvino_runtime import openvino_precision
    from .decision_cache import check_writable
    from .manifest import write_atomically

    if problem := check_writable(args.reference_cache):
        p.error(problem)
    if args.record and openvino_precision(args.device) != "bf16":
        p.error("--record writes bf16 verdicts: use it with --device 'OpenVINO CPU bf16' "
                "(int8 verdicts are recorded by the exporter)")
    reference = cached_decisions(args.fp32, args.reference_cache)
    results = {}
    for variant in args.variants:
        results[str(variant)] = r = compare(reference, variant, device=args.device)
        print(json.dumps({"variant": str(variant), "passed": r["passed"], **r["summary"],
                          "checks": r["checks"], "workflows": r["workflows"]}), flush=True)
        if args.json is not None:
            write_atomically(args.json, (json.dumps(results, indent=2) + "\n").encode())
        if args.record:
            print(f"recorded in {record_bf16(variant, r)}", flush=True)
    return 0 if all(r["passed"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
