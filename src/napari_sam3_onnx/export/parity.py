"""Parity of an exported ``nso-sam3`` bundle against Meta's PyTorch code on the same weights.

The plugin side runs through the plugin's own engine and adapter (``open_adapter``,
``engine.interactive.segment``, ``engine.concepts.search``,
``engine.tracking.propagation.propagate``); the PyTorch side through :mod:`.reference`.
:func:`run` returns every number it measured, per part, and :func:`check` turns them into
pass/fail against :data:`TOLERANCES`.

Usage: ``python -m napari_sam3_onnx.export.parity BUNDLE --bpe VOCAB [--parts clicks,...]``
(rebuilds the reduced random-weight model with the manifest's seed; for a checkpoint bundle
pass ``--checkpoint``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: Pass/fail limits. Logit/score limits apply where both sides run the same arithmetic in fp32.
TOLERANCES = {
    "logit_abs": 1e-3,     # mask logits (values of order 10-100 here): max |diff|
    "logit_rel": 1e-4,     # ... relative to the largest |logit| of the reference
    "score_abs": 1e-4,     # IoU predictions, object scores, detection scores
    "mask_iou": 0.99,
}

PARTS = ("clicks", "concepts", "propagation")


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def _rel(diff: float, ref: np.ndarray) -> float:
    return float(diff / max(1e-6, float(np.abs(ref).max())))


def clicks(adapter, ref, img: np.ndarray, state: dict) -> list[dict]:
    """Click / box prompts: engine ``segment`` vs ``predict_inst``."""
    from ..engine.interactive import Prompt, prepare_prompt, segment
    from ..engine.postprocess import MASK_INPUT_CLAMP

    emb = adapter.encode(img)
    h, w = img.shape[:2]
    cases = [
        ("one click", [[420.0, 510.0]], [1], None, None),
        ("two clicks", [[420.0, 510.0], [700.0, 260.0]], [1, 0], None, None),
        ("box", None, None, [300.0, 350.0, 640.0, 720.0], None),
        ("box + click", [[470.0, 530.0]], [1], [300.0, 350.0, 640.0, 720.0], None),
        ("click + mask prompt", [[420.0, 510.0], [520.0, 450.0]], [1, 1], None, "prev"),
    ]
    out, prev = [], None
    for name, pts, labs, box, mask in cases:
        pts_a = None if pts is None else np.asarray(pts, np.float32)
        labs_a = None if labs is None else np.asarray(labs, np.int32)
        box_a = None if box is None else np.asarray(box, np.float32)
        mask_in = prev[None] if mask == "prev" and prev is not None else None
        r = ref.predict_inst(state, pts_a, labs_a, box_a, mask_in)
        if prev is None:
            prev = r["low_res"]
        prompt = Prompt.clicks(
            np.zeros((0, 2)) if pts_a is None else pts_a[:, ::-1],
            None if labs_a is None else labs_a,
            None if box_a is None else box_a[[1, 0, 3, 2]],
            None if mask_in is None else mask_in[0])
        ours = segment(adapter, emb, prompt)
        xy, labels = prepare_prompt(prompt, (h, w), emb.input_size)
        mi = None if mask_in is None else np.clip(mask_in[0], -MASK_INPUT_CLAMP,
                                                  MASK_INPUT_CLAMP)
        cands = adapter.prompt_decoder.predict_masks(emb, xy, labels, mi)
        low = np.clip(cands.logits[r["index"]], -32, 32)
        diff = float(np.abs(low - r["low_res"]).max())
        out.append({
            "case": name, "candidate_ours": ours.candidate, "candidate_ref": r["index"],
            "logit_abs": diff, "logit_rel": _rel(diff, r["low_res"]),
            "iou_pred_abs": abs(float(cands.iou[r["index"]]) - r["iou"]),
            "mask_iou": _iou(ours.mask, r["mask_logits"] > 0),
            "mask_pixels": int(ours.mask.sum()),
        })
    return out


def concepts(adapter, ref, img: np.ndarray, state: dict, bundle: Path) -> list[dict]:
    """Text, exemplar box, text + box: adapter ``detect`` / engine search vs ``Sam3Processor``."""
    from ..engine.concepts.search import TextCache, search_slice
    from ..engine.concepts.tokenizer import ClipTokenizer
    from ..engine.postprocess import logits_to_mask

    emb = adapter.encode(img)
    tok = ClipTokenizer.from_folder(bundle)
    texts = TextCache(adapter, tok)
    box = [0.47, 0.5, 0.3, 0.34]  # cx, cy, w, h normalised
    cases = [("text 'cell'", "cell", []), ("exemplar box", None, [box]),
             ("text + box", "round blob", [box])]
    out = []
    upstream_tok = ref.model.backbone.language_backbone.tokenizer
    for name, text, boxes in cases:
        r = ref.concept(state, text, boxes, [True] * len(boxes))
        phrase = text or "visual"
        ids_ours = tok.encode(phrase)
        ids_ref = [int(t) for t in upstream_tok([phrase], context_length=32)[0] if int(t)]
        det = adapter.concept_detector.detect(
            emb, texts.get(phrase), np.asarray(boxes, np.float32).reshape(-1, 4) if boxes else None,
            np.ones(len(boxes), np.int64) if boxes else None)
        keep_ours = np.flatnonzero(det.scores > 0.5)
        scores_ref = 1 / (1 + np.exp(-r["pred_logits"])) / (1 + np.exp(-r["presence"]))
        keep_ref = np.flatnonzero(scores_ref > 0.5)
        mdiff = float(np.abs(det.masks - r["pred_masks"]).max())
        ious = [_iou(logits_to_mask(det.masks[i], img.shape[:2], 0.0), m)
                for i, m in zip(keep_ref, r["masks"], strict=True)] if np.array_equal(
                    keep_ours, keep_ref) else []
        engine = search_slice(adapter, emb, [text] if text else [], texts, floor=0.5,
                              exemplars=None)
        ref_scores = np.sort(r["scores"])[::-1]
        out.append({
            "case": name, "tokens_equal": ids_ours == ids_ref,
            "kept_ours": keep_ours.tolist(), "kept_ref": keep_ref.tolist(),
            "kept_processor": len(r["scores"]),
            "score_abs": float(np.abs(det.scores - scores_ref).max()),
            "box_abs": float(np.abs(det.boxes - _xyxy(r["pred_boxes"])).max()),
            "mask_logit_abs": mdiff, "mask_logit_rel": _rel(mdiff, r["pred_masks"]),
            "min_mask_iou": min(ious) if ious else (1.0 if not len(keep_ref) else 0.0),
            "engine_instances": len(engine.instances),
            "engine_scores_vs_processor": float(np.abs(
                np.sort([i.score for i in engine.instances])[::-1] - ref_scores).max())
            if text and len(engine.instances) == len(ref_scores) and len(ref_scores) else None,
        })
    return out


def _xyxy(b: np.ndarray) -> np.ndarray:
    return np.concatenate([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], axis=1)


def propagation(adapter, ref, n_slices: int = 5, seed: int = 2) -> list[dict]:
    """A 5-slice stack, one click on the middle slice, both directions, one bank."""
    from ..engine.encoding import SliceEncoder, refs_along_axis
    from ..engine.postprocess import fill_holes, hole_area_for, logits_to_mask
    from ..engine.tracking.propagation import propagate
    from ..engine.tracking.types import Seed
    from .scenes import test_image

    frames = [test_image(1, shift=(4.0 * i, 6.0 * i)) for i in range(n_slices)]
    click_xy = np.array([[420.0 + 6 * seed, 510.0 + 4 * seed]], np.float32)
    r = ref.propagate(frames, seed, click_xy, np.array([1], np.int32))
    stack = np.stack(frames)
    refs = refs_along_axis(stack, rgb=True, source="parity")[:n_slices]
    res = propagate(adapter, SliceEncoder(adapter), refs,
                    {1: Seed.clicks(seed, click_xy[:, ::-1], [1])}, direction="both",
                    stop_after_absent=None, fill_hole_area=0)
    outs = res.objects[1].outputs
    rows = []
    shape = frames[0].shape[:2]
    for k in range(n_slices):
        o, lr = outs[k], r[k]
        if k == seed:
            # The engine shows a prompted slice with the click path's hole filling (SAM 3's
            # image predictor, 256 px at 288); SAM 3's video tracker shows it unfilled
            # (fill_hole_area=0). Its memory gets the unfilled logits in both. Compare like
            # with like: the reference filled by the same rule.
            lr = fill_holes(lr, hole_area_for(lr.shape))
        diff = float(np.abs(o.low_res_logits - lr).max())
        rows.append({"slice": k, "prompted": k == seed, "logit_abs": diff,
                     "logit_rel": _rel(diff, lr),
                     "mask_iou": _iou(o.mask, logits_to_mask(lr, shape, 0.0)),
                     "mask_pixels": int(o.mask.sum())})
    return rows


def run(bundle: Path | str, model, parts: Sequence[str] = PARTS, log=print) -> dict:
    """Measure every part; returns ``{part: [rows]}`` plus timings."""
    from ..models.bundle import open_adapter
    from ..models.runtime import RuntimeConfig
    from .reference import Reference
    from .scenes import test_image

    bundle = Path(bundle)
    adapter = open_adapter(bundle, RuntimeConfig())
    if adapter.layout != "nso-sam3":
        raise AssertionError(f"the bundle was recognised as {adapter.layout}, not nso-sam3")
    ref = Reference(model)
    img = test_image(0)
    state: dict = ref.set_image(img) if {"clicks", "concepts"} & set(parts) else {}
    result: dict = {"layout": adapter.layout, "seconds": {}}
    for part in parts:
        t0 = time.perf_counter()
        if part == "clicks":
            result[part] = clicks(adapter, ref, img, state)
        elif part == "concepts":
            result[part] = concepts(adapter, ref, img, state, bundle)
        elif part == "propagation":
            result[part] = propagation(adapter, ref)
        else:
            raise ValueError(f"unknown part {part!r}")
        result["seconds"][part] = round(time.perf_counter() - t0, 1)
        log(f"{part}: {json.dumps(result[part])}")
    adapter.close()
    return result


def failures(result: dict, tol: dict | None = None) -> list[str]:
    """Every row of ``result`` outside the tolerances, as readable lines (empty: all pass)."""
    t = {**TOLERANCES, **(tol or {})}
    bad = []

    def logit_ok(row, abs_key, rel_key):
        return row[abs_key] <= t["logit_abs"] or row[rel_key] <= t["logit_rel"]

    for row in result.get("clicks", []):
        if (row["candidate_ours"] != row["candidate_ref"] or not logit_ok(row, "logit_abs",
                                                                          "logit_rel")
                or row["iou_pred_abs"] > t["score_abs"] or row["mask_iou"] < t["mask_iou"]):
            bad.append(f"clicks {row}")
    for row in result.get("concepts", []):
        if (not row["tokens_equal"] or row["kept_ours"] != row["kept_ref"]
                or len(row["kept_ref"]) != row["kept_processor"]
                or row["score_abs"] > t["score_abs"]
                or not logit_ok(row, "mask_logit_abs", "mask_logit_rel")
                or row["min_mask_iou"] < t["mask_iou"]):
            bad.append(f"concepts {row}")
    for row in result.get("propagation", []):
        if row["mask_iou"] < t["mask_iou"] or not logit_ok(row, "logit_abs", "logit_rel"):
            bad.append(f"propagation {row}")
    return bad


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    from .build import adjust_for_parity, build_model

    p = argparse.ArgumentParser(prog="python -m napari_sam3_onnx.export.parity")
    p.add_argument("bundle", type=Path)
    p.add_argument("--bpe", required=True, type=Path)
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--json", type=Path, help="write the measurements here")
    args = p.parse_args(argv)
    manifest = json.loads((args.bundle / "manifest.json").read_text(encoding="utf-8"))
    src = manifest.get("source", {})
    model = build_model(args.bpe, args.checkpoint, seed=int(src.get("seed", 0)))
    if args.checkpoint is None and src.get("adjusted_for_parity", False):
        adjust_for_parity(model)
    result = run(args.bundle, model, [s for s in args.parts.split(",") if s])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    bad = failures(result)
    for line in bad:
        print("FAIL", line)
    print("parity:", "ok" if not bad else f"{len(bad)} failing rows")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
