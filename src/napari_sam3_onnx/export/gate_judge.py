"""The decision gate's judgement: a variant's decisions against fp32's, measured and checked.

Pure functions over two :func:`~.gate.decisions` results (no model runs): per-stage checks
against the thresholds :data:`GATES`, one verdict per workflow (:data:`WORKFLOWS`) and the
relative error of every output (docs/layouts.md#judging-a-precision-change).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Thresholds of the gate (variant against fp32 on the same prompts).
GATES = {"click_mask_iou_min": 0.98, "concept_same_kept": True, "concept_mask_iou_min": 0.95,
         "propagation_mask_iou_min": 0.97, "automatic_mask_iou_min": 0.95}
#: The workflows the gate judges separately, and the stage (and concept prompt) behind each.
WORKFLOWS = ("clicks", "text", "exemplars", "propagation", "automatic")
#: The gate's stages, in the order they run (cheapest first).
STAGES = ("clicks", "concepts", "propagation", "automatic")


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def rel_error(ref: np.ndarray, other: np.ndarray) -> float:
    """``|other - ref|_2 / |ref|_2`` in float64 (0 when both are zero)."""
    ref, other = np.asarray(ref, np.float64), np.asarray(other, np.float64)
    norm = np.linalg.norm(ref)
    diff = np.linalg.norm(other - ref)
    return float(diff / norm) if norm > 0 else float(diff > 0)


def _automatic_check(a: list, b: list) -> dict:
    """fp32's automatic masks ``a`` against the variant's ``b``: counts and best-match IoUs."""
    ious = [max((_iou(ma, mb) for mb, _ in b), default=0.0) for ma, _ in a]
    return {"masks_fp32": len(a), "masks_other": len(b), "same_count": len(a) == len(b),
            "min_mask_iou": min(ious) if ious else 1.0}


def workflow_verdicts(checks: dict, concepts: list | None, gates: dict) -> dict:
    """One verdict per workflow of :data:`WORKFLOWS` (None: its stage was not run).

    Clicks and boxes share the clicks stage; text and exemplars are the concept prompts
    ``"cell"`` and ``"visual"`` (an exemplar box) judged one by one.
    """
    def concept(prompt: str) -> bool | None:
        if concepts is None:
            return None
        c = next(c for c in concepts if c["prompt"] == prompt)
        return bool((c["same_kept"] or not gates["concept_same_kept"])
                    and c["min_mask_iou"] >= gates["concept_mask_iou_min"])

    return {"clicks": checks["clicks"], "text": concept("cell"),
            "exemplars": concept("visual"), "propagation": checks["propagation"],
            "automatic": checks["automatic"]}


def judge(a: dict, b: dict, g: dict, phrases: Sequence[str]) -> dict:
    """The gate's measurements and checks for the stages ``b`` holds (others: None).

    ``a``, ``b``: decisions of fp32 and of the variant; ``g``: the thresholds (:data:`GATES`);
    ``phrases``: the concept prompts' names, in the order of ``a["concepts"]``.
    """
    out: dict[str, Any] = {"feature_rel_error": {k: rel_error(v, b["features"][k])
                                                 for k, v in a["features"].items()}}
    checks: dict[str, bool | None] = dict.fromkeys(STAGES)
    summary = {"feature_max_rel_error": max(out["feature_rel_error"].values())}
    if "clicks" in b:
        clicks = [{"same_candidate": ca["candidate"] == cb["candidate"],
                   "mask_iou": _iou(ca["mask"], cb["mask"]),
                   "logits_rel_error": rel_error(ca["logits"], cb["logits"])}
                  for ca, cb in zip(a["clicks"], b["clicks"], strict=True)]
        out["clicks"] = clicks
        summary["click_min_iou"] = min(float(c["mask_iou"]) for c in clicks)
        checks["clicks"] = all(c["same_candidate"] and c["mask_iou"] >= g["click_mask_iou_min"]
                               for c in clicks)
    if "concepts" in b:
        concepts = [_concept(phrase, da, db) for phrase, da, db
                    in zip(phrases, a["concepts"], b["concepts"], strict=True)]
        out["concepts"] = concepts
        summary["concept_min_iou"] = min(float(c["min_mask_iou"]) for c in concepts)
        checks["concepts"] = all((c["same_kept"] or not g["concept_same_kept"])
                                 and c["min_mask_iou"] >= g["concept_mask_iou_min"]
                                 for c in concepts)
    if "propagation" in b:
        pairs = list(zip(a["propagation"], b["propagation"], strict=True))
        prop = [_iou(x[0], y[0]) for x, y in pairs]
        out["propagation_mask_iou"] = prop
        out["propagation_logits_rel_error"] = [rel_error(x[1], y[1]) for x, y in pairs]
        summary["propagation_min_iou"] = min(prop)
        checks["propagation"] = min(prop) >= g["propagation_mask_iou_min"]
    if "automatic" in b and "automatic" in a:
        auto = _automatic_check(a["automatic"], b["automatic"])
        out["automatic"] = auto
        summary["automatic_min_iou"] = auto["min_mask_iou"]
        checks["automatic"] = auto["same_count"] and \
            auto["min_mask_iou"] >= g["automatic_mask_iou_min"]
    workflows = workflow_verdicts(checks, out.get("concepts"), g)
    return {**out, "summary": summary, "checks": checks, "workflows": workflows, "gates": g,
            "passed": all(c is True for c in checks.values())}


def _concept(phrase: str, da: dict, db: dict) -> dict:
    """One concept prompt's kept detections and mask agreement, fp32 ``da`` against ``db``."""
    both = sorted(set(da["masks"]) & set(db["masks"]))
    ious = [_iou(da["masks"][i][0], db["masks"][i][0]) for i in both]
    flipped = sorted(set(da["masks"]) ^ set(db["masks"]))
    return {"prompt": phrase, "kept_fp32": len(da["masks"]), "kept_other": len(db["masks"]),
            "same_kept": not flipped,
            # the queries kept by one bundle only, with both scores: a flip at 0.4999 -> 0.5001
            # is still a changed decision, but the user should see how close it was
            "flipped": [(i, float(da["scores"][i]), float(db["scores"][i])) for i in flipped],
            "min_mask_iou": min(ious) if ious else 1.0,
            "max_score_change": float(np.abs(da["scores"] - db["scores"]).max()),
            "mask_logits_rel_error": max((rel_error(da["masks"][i][1], db["masks"][i][1])
                                          for i in both), default=0.0)}
