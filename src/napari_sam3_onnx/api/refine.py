"""Refine a label that is already in a labels array: the one path the Clicks tab and the API run.

A :class:`LabelTarget` is one label id on one plane, picked from any labels array. Its prompt
(:func:`refine_prompt`) is the label's bounding box plus, where the bundle's prompt decoder takes
a mask prompt, the label's mask as low-res logits
(:func:`~napari_sam3_onnx.engine.label_prompt.label_logits`); every further click refines the
answer (SAM's refinement: the previous answer's logits are fed back while the clicks only grow).
:func:`refine_label` answers on the whole plane; :func:`~napari_sam3_onnx.engine.label_prompt.
replace_label` is the commit rule: exactly that id's pixels on that plane change. No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..engine.encoding import SliceEncoder, SliceRef
from ..engine.interactive import ObjectMask, Prompt
from ..engine.label_prompt import label_logits, label_prompt, replace_label
from ..engine.slices import extract_plane
from ..engine.store.embedding_store import fingerprint
from ..models.base import Capability, SamAdapter
from ..models.errors import PromptError
from .bundles import Bundle, as_bundle
from .clicks import segment_object
from .io import InputError, planes_view
from .validate import check_points, check_window

__all__ = ["LabelTarget", "mask_note", "pick_label", "refine", "refine_label", "refine_prompt",
           "replace_label"]

#: What the panel says when a bundle's decoder takes no mask prompt.
NO_MASK_NOTE = ("This bundle's point decoder takes no mask prompt: the label's box and your "
                "clicks are used, not its outline.")


@dataclass(frozen=True)
class LabelTarget:
    """One label picked for refinement.

    Attributes
    ----------
    label_id : int
        The label's value (> 0).
    index : tuple of int
        The plane's index along the leading axes.
    mask : numpy.ndarray
        ``(rows, cols)`` bool, the label's pixels on that plane when it was picked.
    logits : numpy.ndarray or None
        ``mask_size`` float32 mask prompt made from ``mask`` (None: the decoder takes none).
    """

    label_id: int
    index: tuple[int, ...]
    mask: np.ndarray
    logits: np.ndarray | None

    @property
    def uses_mask(self) -> bool:
        """Whether the label's mask reaches the decoder (else only its box)."""
        return self.logits is not None


def mask_note(adapter: SamAdapter | None) -> str:
    """'' when the bundle's decoder takes a mask prompt, else :data:`NO_MASK_NOTE`."""
    if adapter is None or not adapter.has(Capability.CLICKS):
        return ""
    return "" if adapter.prompt_decoder.accepts_mask_input else NO_MASK_NOTE


def pick_label(adapter: SamAdapter, plane: np.ndarray, label_id: int,
               index: tuple[int, ...] = ()) -> LabelTarget:
    """Label ``label_id`` of ``(rows, cols)`` ``plane`` as a refinement target.

    Raises
    ------
    MissingCapabilityError
        The bundle has no SAM head (clicks).
    PromptError
        The id is not a positive integer or has no pixel on this plane.
    """
    adapter.require(Capability.CLICKS)  # a SAM head: boxes alone go to the detector elsewhere
    label_id = int(label_id)
    if label_id <= 0:
        raise PromptError(f"Label id {label_id}: pick a label (ids are positive; 0 is "
                          "background).")
    mask = np.asarray(plane) == label_id
    if not mask.any():
        raise PromptError(f"Label {label_id} has no pixel on this plane; move to a plane that "
                          "has it or pick another label.")
    logits = None
    if not mask_note(adapter):
        logits = label_logits(mask, adapter.input_size, adapter.mask_size)
    return LabelTarget(label_id, tuple(int(i) for i in index), mask, logits)


def refine_prompt(target: LabelTarget, points_rc=None, labels=None,
                  previous: tuple[Prompt, ObjectMask] | None = None) -> Prompt:
    """The prompt for ``target`` with these clicks (``(N, 2)`` ``(row, col)``, labels 1/0).

    The mask prompt is the label's own logits, or the ``previous`` answer's logits when the
    clicks only added to the previous prompt's (SAM's refinement); after a click was moved or
    removed the label's logits are used again. No mask prompt where the decoder takes none.
    """
    prompt = label_prompt(target.mask, points_rc, labels, logits=target.logits)
    if previous is None or target.logits is None:
        return prompt
    old, answer = previous
    n = len(old.labels)
    extends = (len(prompt.labels) > n and np.array_equal(prompt.points_rc[:n], old.points_rc)
               and np.array_equal(prompt.labels[:n], old.labels))
    if not extends:
        return prompt
    return Prompt(prompt.points_rc, prompt.labels, prompt.box_rc, answer.low_res_logits)


def refine_label(encoder: SliceEncoder, ref: SliceRef, target: LabelTarget, points_rc=None,
                 labels=None, previous: tuple[Prompt, ObjectMask] | None = None
                 ) -> tuple[Prompt, ObjectMask]:
    """SAM's answer for ``target`` on plane ``ref`` (the whole plane) with these clicks.

    Returns
    -------
    prompt : Prompt
        What was asked (pass back as ``previous`` with the answer).
    answer : ObjectMask
        ``mask`` is ``(rows, cols)`` bool on the plane.
    """
    if ref.plane_shape != target.mask.shape:
        raise PromptError(f"The label's plane {target.mask.shape} is not the image's "
                          f"{ref.plane_shape}.")
    prompt = refine_prompt(target, points_rc, labels, previous)
    return prompt, segment_object(encoder, replace(ref, region=None), prompt)


def refine(model_or_folder: Bundle | Path | str, data, labels, label_id: int, points_rc=None,
           point_labels=None, *, index=(), axis: int = 0, rgb: bool = False,
           window: tuple[float, float] | None = None, store=None,
           image: str = "image") -> tuple[np.ndarray, ObjectMask]:
    """Refine label ``label_id`` of ``labels`` on one plane with clicks (the headless API).

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id.
        A bundle with ``clicks``.
    data : array-like
        A 2-D plane or a stack; the plane is ``data[index]`` after moving ``axis`` first.
    labels : array-like
        Integer labels of the same planes (``(..., rows, cols)``, ``axis`` moved the same way).
    label_id : int
        The label to refine; it must have pixels on the plane.
    points_rc, point_labels : array-like, optional
        ``(N, 2)`` clicks ``(row, col)`` and ``(N,)`` 1 = positive (default), 0 = negative;
        none: the label's box and mask alone.
    index, axis, rgb, window, store, image
        As in :func:`napari_sam3_onnx.api.segment`.

    Returns
    -------
    plane : numpy.ndarray
        ``(rows, cols)`` the labels plane with exactly ``label_id``'s pixels replaced by SAM's
        answer (a new array; ``labels`` is not changed).
    answer : ObjectMask
        SAM's answer (``mask`` ``(rows, cols)`` bool, ``low_res_logits`` to refine further).

    Examples
    --------
    >>> plane, answer = api.refine(bundle, stack, cellpose, 5, [[40, 76]], index=(3,))
    >>> plane.shape                                             # (rows, cols): label 5 refit
    """
    bundle = as_bundle(model_or_folder)
    view = planes_view(data, axis, rgb)
    lab_view = planes_view(labels, axis, False)
    index = tuple(int(i) for i in index)
    try:
        plane_img = extract_plane(view, index, rgb)
        plane = np.asarray(extract_plane(lab_view, index, False))
    except (IndexError, ValueError) as exc:
        raise InputError(f"index={index} does not name a plane of the image and the labels "
                         f"({exc}).") from exc
    if plane.shape != plane_img.shape[:2]:
        raise InputError(f"The labels' planes {plane.shape} are not the image's "
                         f"{plane_img.shape[:2]}.")
    pts = np.zeros((0, 2)) if points_rc is None else points_rc
    check_points(pts, point_labels, plane.shape)
    ref = SliceRef(view, index, rgb, check_window(window), source=image,
                   data_version=fingerprint(plane_img))
    target = pick_label(bundle.adapter, plane, label_id, index)
    st = None if store is None else bundle.open_store(store)
    _, answer = refine_label(bundle.encoder(st, bundle.cache), ref, target, pts, point_labels)
    return replace_label(plane, target.label_id, answer.mask), answer
