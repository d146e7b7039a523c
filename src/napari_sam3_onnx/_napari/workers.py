"""Model work off the Qt thread: encode a plane once, then answer its prompts.

:func:`run_job` is a plain function (tested without Qt); :func:`start` runs a function in
napari's thread pool and delivers its result or error on the Qt thread. Every job carries the
generation it was started for; the caller drops results whose generation is no longer current.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from napari.qt.threading import create_worker

from napari_sam3_onnx.engine.concepts.detector_box import segment_prompt
from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt
from napari_sam3_onnx.engine.tiling.tiled import first_tile, for_plane, input_side, segment_on
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import PromptError, Sam3OnnxError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """One run of the prompts of a plane.

    Attributes
    ----------
    generation : int
        The session's generation when the job was made.
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


def run_job(encoder: SliceEncoder, job: Job, texts: TextCache | None = None) -> JobResult:
    """Embed the job's plane, view or tiles (from the cache when possible); segment each object.

    ``texts`` lets a detector-only bundle answer boxes (SAM 3's "visual" exemplar path). The
    encoder's cache is single-flight per plane: a plane another tab is encoding is waited for.
    """
    need = Capability.CLICKS if encoder.adapter.has(Capability.CLICKS) else Capability.TEXT

    def embed(ref: SliceRef):
        return encoder.embed(ref, need)

    if job.tiling is None and job.ref.region is None:  # the whole plane, encoded up front
        embedding = embed(job.ref)

        def segment(p: Prompt) -> ObjectMask:
            return segment_prompt(encoder.adapter, embedding, for_plane(p), texts)
    else:  # the field of view or tiles (masks cover the whole plane all the same)

        def segment(p: Prompt) -> ObjectMask:
            return segment_on(encoder.adapter, embed, job.ref, p, texts, job.tiling)
    result = JobResult(job)
    for key, prompt in job.objects:
        try:
            mask = segment(prompt)
            result.masks.append((key, prompt, mask))
        except PromptError as exc:
            result.problems.append(str(exc))
    return result


def will_encode(encoder: SliceEncoder, job: Job) -> bool:
    """Whether the job must run the image encoder first (for the busy indicator)."""
    tiling = job.tiling
    refs = [job.ref]
    if tiling is not None and job.ref.region is None and tiling.applies(
            job.ref.plane_shape, input_side(encoder.adapter)):
        refs = [first_tile(encoder.adapter, job.ref, p, tiling) for _, p in job.objects]
    return any(encoder.key(r) not in encoder.cache for r in refs)


def prefetch(encoder: SliceEncoder, refs: Sequence[SliceRef]) -> int:
    """Encode planes that are not cached yet (idle pre-encoding); returns how many were new."""
    done = 0
    for ref in refs:
        if encoder.key(ref) not in encoder.cache:
            encoder.embed(ref)  # waits, without encoding again, if another job has the plane
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


def describe(exc: BaseException) -> str:
    """A message for people: our errors speak for themselves, others get their type named."""
    if isinstance(exc, Sam3OnnxError):
        return str(exc)
    return f"The model run failed ({type(exc).__name__}: {exc})."


def start(
    func: Callable,
    *args,
    on_result: Callable[[object], None],
    on_error: Callable[[BaseException], None],
    on_finish: Callable[[], None] | None = None,
):
    """Run ``func(*args)`` in napari's thread pool; callbacks arrive on the Qt thread.

    Returns
    -------
    napari.qt.threading.FunctionWorker
        The started worker.
    """

    def _error(exc: BaseException) -> None:
        log.debug("worker failed", exc_info=exc)
        on_error(exc)

    connect: dict = {"returned": on_result, "errored": _error}
    if on_finish is not None:
        connect["finished"] = on_finish
    return create_worker(func, *args, _connect=connect, _ignore_errors=True, _start_thread=True)
