"""Click and box prompts on one encoded slice: SAM's interactive path in numpy.

Prompts arrive in slice coordinates ``(row, col)`` and leave as a boolean mask of the slice.
Everything in between (model coordinates, box-as-two-points, candidate choice, hole filling,
upsampling) follows SAM 3's image predictor (docs/layouts.md#clicks-and-boxes-on-the-sam-head).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from napari_sam3_onnx.engine import coords
from napari_sam3_onnx.engine.decode import Decoded, decode_step, mask_input_for
from napari_sam3_onnx.engine.postprocess import logits_to_mask
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter
from napari_sam3_onnx.models.errors import PromptError


@dataclass(frozen=True)
class Prompt:
    """One object's prompts on one slice.

    Attributes
    ----------
    points_rc : numpy.ndarray
        ``(N, 2)`` float click positions ``(row, col)`` in slice pixels.
    labels : numpy.ndarray
        ``(N,)`` int, 1 = positive, 0 = negative.
    box_rc : numpy.ndarray or None
        ``(4,)`` box corners ``(r0, c0, r1, c1)`` in slice pixels (any order; clipped).
    mask_logits : numpy.ndarray or None
        ``(h, w)`` low-res logits of the previous prediction for this object (refinement).
    mask_region : tuple[int, int, int, int] or None
        The region (tile or field of view, ``(r0, c0, r1, c1)``) the logits were predicted on,
        None for the whole slice; logits are only fed back on the same region.

    Examples
    --------
    >>> p = api.Prompt.clicks([[40, 61], [10, 12]], [1, 0])    # (row, col); 1 = positive
    >>> b = api.Prompt.clicks([], box_rc=(30, 50, 52, 75))        # a box (r0, c0, r1, c1)
    """

    points_rc: np.ndarray
    labels: np.ndarray
    box_rc: np.ndarray | None = None
    mask_logits: np.ndarray | None = None
    mask_region: tuple[int, int, int, int] | None = None

    @classmethod
    def clicks(cls, points_rc, labels=None, box_rc=None, mask_logits=None) -> Prompt:
        """Build a prompt; ``labels`` defaults to all positive."""
        pts = np.asarray(points_rc, dtype=np.float64).reshape(-1, 2)
        labs = np.ones(len(pts), np.int64) if labels is None else np.asarray(labels, np.int64)
        if labs.shape != (len(pts),):
            raise PromptError(f"{len(pts)} points but {labs.size} labels")
        box = None if box_rc is None else np.asarray(box_rc, dtype=np.float64).reshape(4)
        return cls(pts, labs, box, mask_logits)


@dataclass(frozen=True)
class ObjectMask:
    """The result of prompting one object.

    Attributes
    ----------
    mask : numpy.ndarray
        ``(rows, cols)`` bool on the slice.
    low_res_logits : numpy.ndarray
        ``(h, w)`` float32 logits of the chosen candidate (feed back as ``Prompt.mask_logits``).
    iou : float
        The decoder's predicted IoU of the chosen candidate.
    object_score : float
        Presence logit; the object is absent when it is <= 0 (the mask is then empty).
    candidate : int
        Which candidate was chosen.
    region : tuple[int, int, int, int] or None
        The tile or field of view ``(r0, c0, r1, c1)`` that was encoded and prompted (None: the
        whole slice); ``low_res_logits`` cover that region, ``mask`` still covers the slice.
    """

    mask: np.ndarray
    low_res_logits: np.ndarray
    iou: float
    object_score: float
    candidate: int
    region: tuple[int, int, int, int] | None = None

    @property
    def present(self) -> bool:
        """Whether the model says the object is there."""
        return self.object_score > 0


def prepare_prompt(
    prompt: Prompt, image_shape: tuple[int, int], input_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Model-space points and labels: the box (labels 2, 3) first, then the clicks.

    Raises
    ------
    PromptError
        Nothing usable is left: every click is outside the slice and there is no valid box.
    """
    keep = coords.inside(prompt.points_rc, image_shape)
    pts_rc, labels = prompt.points_rc[keep], prompt.labels[keep]
    box = None
    if prompt.box_rc is not None:
        box = coords.normalise_box_rc(prompt.box_rc, image_shape)
        if box is None and len(pts_rc) == 0:
            raise PromptError(
                "The box is outside the image or has no area; draw it over the object."
            )
    if box is None and len(pts_rc) == 0:
        raise PromptError("No click lies inside the image; click on the object.")
    xy = coords.rc_to_model_xy(pts_rc, image_shape, input_size)
    labels = labels.astype(np.int64)
    if box is not None:
        corners = coords.box_rc_to_model_points(box, image_shape, input_size)
        xy = np.concatenate([corners, xy], axis=0)
        labels = np.concatenate([np.array([2, 3], np.int64), labels])
    return xy.astype(np.float32), labels


def decode_prompt(
    adapter: SamAdapter, embedding: Embedding, prompt: Prompt, hole_area: int | None
) -> Decoded:
    """Run the SAM head on one prompt and reduce its answer (:func:`~.decode.decode_step`).

    ``prompt.mask_logits`` (fed-back logits of an earlier answer) become the mask prompt where
    the decoder takes one.
    """
    xy, labels = prepare_prompt(prompt, embedding.image_shape, embedding.input_size)
    cands = adapter.prompt_decoder.predict_masks(embedding, xy, labels,
                                                 mask_input_for(adapter, prompt.mask_logits))
    return decode_step(cands, len(labels), hole_area)  # a box is two points (labels 2 and 3)


def segment(
    adapter: SamAdapter,
    embedding: Embedding,
    prompt: Prompt,
    fill_hole_area: int | None = None,
) -> ObjectMask:
    """Segment one object on an encoded slice.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with the ``clicks`` capability.
    embedding : Embedding
        The slice's embedding (``embedding.image_shape`` is the slice's ``(rows, cols)``).
    prompt : Prompt
        Clicks and/or a box in slice coordinates.
    fill_hole_area : int, optional
        Largest background hole (low-res pixels) to fill; default: SAM 3's 256 px at 288 x 288,
        scaled to the graph's mask size.
    """
    if not adapter.has(Capability.CLICKS):
        adapter.require(Capability.CLICKS)
    step = decode_prompt(adapter, embedding, prompt, fill_hole_area)
    # Holes are filled for display only; the logits fed back as the next mask prompt stay as the
    # decoder returned them, as SAM 3's predictor returns its low-res masks unfilled.
    return ObjectMask(
        mask=logits_to_mask(step.display_logits, embedding.image_shape),
        low_res_logits=step.feedback_logits,
        iou=step.iou,
        object_score=step.object_score,
        candidate=step.candidate,
    )
