"""One object from whatever prompts the bundle takes: the click/box dispatcher.

A bundle with a SAM head takes clicks and boxes (:func:`.interactive.segment`); a bundle with a
concept detector but no SAM head takes a box alone
(:func:`.concepts.detector_box.segment_box_with_detector`).
This module sits above :mod:`.interactive` and :mod:`.concepts` (it uses both), so it is not
part of :mod:`.interactive` itself, which the concepts import.
"""

from __future__ import annotations

from napari_sam3_onnx.engine.concepts.detector_box import segment_box_with_detector
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt, segment
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter
from napari_sam3_onnx.models.errors import CapabilityError, PromptError


def segment_prompt(
    adapter: SamAdapter, embedding: Embedding, prompt: Prompt, texts: TextCache | None = None
) -> ObjectMask:
    """Segment one object with whatever the bundle offers.

    A SAM head (``clicks``) takes clicks and boxes; a detector-only bundle takes a box alone
    (clicks are refused with a message saying so).
    """
    if adapter.has(Capability.CLICKS):
        return segment(adapter, embedding, prompt)
    if adapter.has(Capability.BOXES) and adapter.has(Capability.TEXT) and texts is not None:
        if len(prompt.points_rc):
            raise PromptError(
                f"The {adapter.layout} bundle has no click decoder: draw a box around the "
                "object instead (or load a bundle with clicks)."
            )
        if prompt.box_rc is None:
            raise PromptError("Draw a box around the object.")
        return segment_box_with_detector(adapter, embedding, prompt.box_rc, texts)
    raise CapabilityError(adapter.layout, "clicks")
