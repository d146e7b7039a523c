"""Clicks and boxes on a plane: the one path the Clicks tab, :func:`api.segment` and tests run.

:func:`segment_object` answers one object; :func:`run_job` the objects of a plane, as the
widget asks for them; :func:`will_encode`, :func:`prefetch` and :func:`neighbours` let a caller
show a busy indicator and pre-encode the planes around the current one. No Qt here: the widget
runs these functions in napari's thread pool (``_napari.workers.start``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..engine.concepts.detector_box import segment_prompt
from ..engine.concepts.search import TextCache
from ..engine.encoding import SliceEncoder, SliceRef
from ..engine.interactive import ObjectMask, Prompt
from ..engine.tiling.tiled import first_tile, for_plane, input_side, segment_on
from ..engine.tiling.tiles import TileSettings
from ..models.base import Capability
from ..models.errors import PromptError


@dataclass(frozen=True)
class Job:
    """One run of the prompts of a plane.

    Attributes
    ----------
    generation : int
        The caller's tag for the job (the widget's generation when it was made).
    ref : SliceRef
        The plane.
    objects : sequence of (key, Prompt)
        The objects to segment.
    tiling : TileSettings or None
        Answer prompts on tiles when the plane is large (None: on the whole plane, or on
        ``ref.region`` when the field of view is encoded).
    """

    generation: int
    ref: SliceRef
    objects: Sequence[tuple[tuple, Prompt]]
    tiling: TileSettings | None = None


@dataclass(frozen=True)
class JobResult:
    """What a job produced.

    Attributes
    ----------
    job : Job
        The job.
    masks : list of (key, Prompt, ObjectMask)
        One entry per object that could be segmented.
    problems : list of str
        Messages for objects that could not (a degenerate box, a click outside the image).
    """

    job: Job
    masks: list[tuple[tuple, Prompt, ObjectMask]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def segment_object(
    encoder: SliceEncoder,
    ref: SliceRef,
    prompt: Prompt,
    texts: TextCache | None = None,
    tiling: TileSettings | None = None,
) -> ObjectMask:
    """Segment one object (clicks and/or a box) on a plane: the one clicks-and-boxes step.

    Parameters
    ----------
    encoder : SliceEncoder
        Encodes the plane (or its tiles, or ``ref.region``) once; its cache is single-flight.
    ref : SliceRef
        The plane; with ``ref.region`` set, the field of view around the prompts is encoded.
    prompt : Prompt
        Clicks ``(row, col)`` and/or a box in slice pixels, optional feedback logits.
    texts : TextCache, optional
        Lets a detector-only bundle answer a box (SAM 3's "visual" exemplar path).
    tiling : TileSettings, optional
        Answer on tiles when the plane is large (None: the whole plane or ``ref.region``).

    Returns
    -------
    ObjectMask
        ``mask`` is ``(rows, cols)`` bool on the whole plane, whatever was encoded.
    """
    need = clicks_need(encoder)
    if tiling is None and ref.region is None:  # the whole plane
        return segment_prompt(encoder.adapter, encoder.embed(ref, need), for_plane(prompt), texts)
    return segment_on(encoder.adapter, lambda r: encoder.embed(r, need), ref, prompt, texts,
                      tiling)


def run_job(encoder: SliceEncoder, job: Job, texts: TextCache | None = None) -> JobResult:
    """Segment each of the job's objects on its plane, view or tiles (the Clicks tab's run).

    The plane is encoded once (from the cache when possible; a plane another tab is encoding is
    waited for). An object that cannot be segmented (a degenerate box, a click outside the
    image) becomes a message in ``problems``; the others are still answered.
    """
    result = JobResult(job)
    for key, prompt in job.objects:
        try:
            mask = segment_object(encoder, job.ref, prompt, texts, job.tiling)
            result.masks.append((key, prompt, mask))
        except PromptError as exc:
            result.problems.append(str(exc))
    return result


def clicks_need(encoder: SliceEncoder) -> Capability:
    """The workflow a click or box job encodes for: a SAM head's, or the detector's."""
    return Capability.CLICKS if encoder.adapter.has(Capability.CLICKS) else Capability.TEXT


def will_encode(encoder: SliceEncoder, job: Job) -> bool:
    """Whether the job must run the image encoder first (for the busy indicator)."""
    tiling = job.tiling
    refs = [job.ref]
    if tiling is not None and job.ref.region is None and tiling.applies(
            job.ref.plane_shape, input_side(encoder.adapter)):
        refs = [first_tile(encoder.adapter, job.ref, p, tiling) for _, p in job.objects]
    need = clicks_need(encoder)
    return any(encoder.key(r, need) not in encoder.cache for r in refs)


def prefetch(encoder: SliceEncoder, refs: Sequence[SliceRef]) -> int:
    """Encode planes that are not cached yet (idle pre-encoding); returns how many were new."""
    done, need = 0, clicks_need(encoder)
    for ref in refs:
        if encoder.key(ref, need) not in encoder.cache:
            encoder.embed(ref, need)  # waits, without encoding again, if another job has it
            done += 1
    return done


def neighbours(ref: SliceRef, shape: Sequence[int]) -> list[SliceRef]:
    """The planes one step before and after ``ref`` along its last leading axis (z)."""
    if not ref.index:
        return []
    axis = len(ref.index) - 1
    out = []
    for step in (1, -1):
        k = ref.index[axis] + step
        if 0 <= k < shape[axis]:
            out.append(replace(ref, index=(*ref.index[:axis], k)))
    return out
