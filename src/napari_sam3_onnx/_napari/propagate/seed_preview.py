"""The Propagate tab's half of choosing seeds: the click preview, and why Run is off.

The click session's preview is read through :func:`preview_objects`, the one place that knows
its internals. Choosing seeds from label ids, matching corrections and the texts about a
finished run are plain functions in :mod:`napari_sam3_onnx.api.propagation_seeds` and
:mod:`napari_sam3_onnx.api.propagation_report` (tested without napari).
"""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx._napari.layers import plane_shape
from napari_sam3_onnx._napari.propagate.writer import refused_note
from napari_sam3_onnx._napari.workers import describe
from napari_sam3_onnx.api.propagation_report import summary
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tracking.propagation import STACK_NEEDED
from napari_sam3_onnx.engine.tracking.types import PropagationResult, Seed
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import PromptError


def run_problem(adapter, encoder, image) -> str:
    """Why a propagation cannot start with this model and image ('' if it can)."""
    if adapter is None or encoder is None:
        return "Load a model above to propagate."
    if not adapter.has(Capability.CLICKS):
        return "This bundle has no SAM head (clicks); propagation needs one."
    if image is None:
        return "Choose an image in 'Clicks & boxes'."
    if len(plane_shape(image)) < 3:
        return STACK_NEEDED
    return ""


def preview_objects(session, index: tuple[int, ...]) -> list[tuple[Prompt, np.ndarray]]:
    """``(prompt, mask)`` of each object the click session previews on plane ``index``.

    Raises
    ------
    PromptError
        The preview is still being computed, or there is none on this plane.
    """
    busy = PromptError("The click preview is still being updated; try again when it shows.")
    if session.pending:
        raise busy
    previewed = session.previewed(index)
    if previewed is None:
        raise busy  # a newer prompt's result was dropped or is on its way
    found = [(prompt, mask.mask) for prompt, mask in previewed]
    if not found:
        raise PromptError("There is no previewed object on this slice: click on an object or "
                          "draw a box in the 'Clicks & boxes' tab first, or choose label ids "
                          "or all labels on this slice for objects already committed.")
    return found


def preview_seeds(session, index: tuple[int, ...], k: int, labels) -> dict[int, list[Seed]]:
    """The previewed objects as prompt seeds on slice ``k``, under new ids (``max + 1``, ...)."""
    objects = preview_objects(session, index)
    first = int(np.max(labels)) + 1 if labels.size else 1
    return {first + j: [Seed(k, prompt=p)] for j, (p, _) in enumerate(objects)}


def finished_message(result: PropagationResult | None, error: BaseException | None, writer,
                     axis: str, limit: int | None) -> str:
    """The status line when a run has ended (``writer``: its :class:`RunWriter`)."""
    if error is not None:
        kept = f" {len(writer.written)} slice(s) written before it are kept." \
            if writer.written else ""
        return describe(error) + kept
    if result is None:
        return "The run ended without a result."
    reached = set().union(*writer.slices.values()) if writer.slices else set()
    return summary(result, axis, limit, len(reached)) + refused_note(writer, axis)
