"""What a bundle's decision gate said about each workflow (its ``manifest.json``).

The exporter's gate (``python -m napari_sam3_onnx.export.gate``) compares a precision variant
(int8, fp16) with its fp32 bundle decision by decision and records, besides one verdict for the
whole bundle, one per workflow: ``decision_gate.workflows`` =
``{"clicks": true, "text": false, "exemplars": false, "propagation": true, "automatic": null}``
(null: that stage was not run, e.g. after an earlier stage failed). Reading them needs no
weights and no exporter.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Workflow keys in the order the model section names them, with their words.
WORKFLOW_WORDS = (("clicks", "clicks and boxes"), ("text", "text"), ("exemplars", "exemplars"),
                  ("propagation", "propagation"), ("automatic", "automatic"))


def workflow_verdicts(folder: Path | str) -> dict[str, bool | None] | None:
    """Per-workflow gate verdicts of the bundle in ``folder``; None if it records none.

    An fp32 bundle (the reference itself) and a variant exported ungated record none.
    """
    try:
        manifest = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    gate = manifest.get("decision_gate") if isinstance(manifest, dict) else None
    workflows = gate.get("workflows") if isinstance(gate, dict) else None
    if not isinstance(workflows, dict):
        return None
    return {key: (None if workflows.get(key) is None else bool(workflows[key]))
            for key, _ in WORKFLOW_WORDS}


def verdict_words(verdicts: dict[str, bool | None]) -> str:
    """``"passes clicks and boxes, propagation; fails text, exemplars; not run: automatic"``."""
    groups: dict[object, list[str]] = {True: [], False: [], None: []}
    for key, words in WORKFLOW_WORDS:
        groups[verdicts.get(key)].append(words)
    parts = [f"{label} {', '.join(groups[v])}" for v, label in
             ((True, "passes"), (False, "fails"), (None, "not run:")) if groups[v]]
    return "; ".join(parts)
