"""Hints added to "nothing found" messages (the checks themselves live in the engine)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from napari_sam3_onnx.engine.contrast import prompt_region, window_hides_region
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import Prompt

CONTRAST_HINT = ("The contrast limits show this region as near-black, and the model sees the "
                 "image the way it is shown: check the contrast limits (layer controls), then "
                 "try again.")

#: What a click or box says while no model is loaded (it stays, and runs once one is).
NO_MODEL_FOR_CLICKS = ("No model is loaded, so this prompt cannot be segmented yet: load one "
                       "in the Model row above (Browse..., or Download... > the toy model to "
                       "try the plugin). Your clicks and boxes stay and run once it is loaded.")


def contrast_hint(ref: SliceRef, prompts: Sequence[Prompt] | None = None) -> str:
    """``" " + CONTRAST_HINT`` when ``ref``'s window hides the prompted region, else ``""``.

    Parameters
    ----------
    ref : SliceRef
        The slice the model looked at (its data, index and contrast window).
    prompts : sequence of Prompt, optional
        The clicks and boxes (slice pixels); None judges the whole slice (text search).
    """
    region = None
    if prompts is not None:
        points = [p.points_rc for p in prompts if len(p.points_rc)]
        boxes = [p.box_rc for p in prompts if p.box_rc is not None]
        region = prompt_region(np.concatenate(points) if points else None, boxes,
                               ref.plane_shape)
        if region is None:
            return ""
    try:
        hidden = window_hides_region(ref.data, ref.index, ref.window, region, ref.rgb)
    except (ValueError, IndexError):  # the layer changed under us: no hint rather than a crash
        return ""
    return f" {CONTRAST_HINT}" if hidden else ""
