"""What the model section says about a bundle that runs a precision per workflow.

A per-workflow bundle (:mod:`napari_sam3_onnx.models.workflow_precision`) runs int8 for the
workflows its decision gate passed and fp32 for the others; the model line names both, and
warns that a plane used by workflows of both precisions is encoded twice. No Qt here: HTML
strings the panel shows.
"""

from __future__ import annotations

from pathlib import Path

from napari_sam3_onnx.models.workflow_precision import WorkflowPlanError, read_plan


def per_workflow_note(folder: Path) -> str:
    """The model section's line for a per-workflow bundle (``""`` for any other bundle).

    Example: ``"Precision per workflow (granted by the decision gate against fp32): int8:
    clicks and boxes, propagation; fp32: text, exemplars, automatic. A plane used by ..."``.
    """
    try:
        plan = read_plan(folder)
    except WorkflowPlanError as exc:  # the bundle itself refuses to open with this reason
        return f"Precision per workflow: unreadable ({exc})."
    if plan is None:
        return ""
    note = (f"<b>Precision per workflow</b> (granted by the decision gate against fp32): "
            f"{plan.words()}.")
    if double := plan.double_encode_note():
        note += f" Note: {double[0].upper()}{double[1:]}."
    return note + (" With an embedding store attached, every workflow runs the fp32 encoder "
                   "(a store keeps one embedding per plane).")
