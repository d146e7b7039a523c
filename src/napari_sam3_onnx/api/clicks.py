"""Clicks and boxes on planes: the one path the Clicks tab, :func:`segment` and tests run.

:func:`iter_segment` is the clicks workflow in the shape every workflow has
(``iter_<workflow>(workspace, refs, prompts, *, cancelled)``, one :class:`SegmentStep` per
plane); :func:`segment` is its one-call form on one plane of an array. Underneath,
:func:`run_job` answers the objects of one plane (the Clicks tab runs it per preview, tagged
with its generation) and :func:`segment_object` one object; :func:`will_encode` lets a caller
show a busy indicator (planes are encoded ahead by
:class:`~napari_sam3_onnx.engine.encode_ahead.EncodeAhead`). No Qt here: the widget runs
these functions in napari's thread pool (``_napari.workers.start``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..engine.concepts.search import TextCache
from ..engine.encoding import SliceEncoder, SliceRef
from ..engine.interactive import ObjectMask, Prompt
from ..engine.interactive_dispatch import segment_prompt
from ..engine.slices import extract_plane
from ..engine.store.embedding_store import EmbeddingStore, fingerprint
from ..engine.tiling.tiled import first_tile, for_plane, input_side, segment_on
from ..engine.tiling.tiles import TileSettings
from ..models.base import Capability
from ..models.errors import PromptError
from .bundles import Bundle, as_bundle
from .io import InputError, planes_view
from .validate import check_box, check_points, check_window
from .workspace import Workspace


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


@dataclass(frozen=True)
class SegmentStep:
    """One finished plane of :func:`iter_segment`.

    Attributes
    ----------
    index : tuple[int, ...]
        The plane's leading indices.
    masks : dict
        Object key -> :class:`~napari_sam3_onnx.engine.interactive.ObjectMask` (``mask``:
        ``(rows, cols)`` bool on the whole plane), for each object that could be segmented.
    problems : list of str
        Messages for the objects that could not (a degenerate box, a click off the plane).
    done, total : int
        Planes finished so far, and planes asked for.
    """

    index: tuple[int, ...]
    masks: dict[Hashable, ObjectMask]
    problems: list[str]
    done: int
    total: int


def iter_segment(
    workspace: Workspace,
    refs: Sequence[SliceRef],
    prompts: Mapping[tuple[int, ...], Mapping[Hashable, Prompt]],
    *,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[SegmentStep]:
    """Segment the prompted objects of each plane of ``refs``; yield each plane as it finishes.

    Parameters
    ----------
    workspace : Workspace
        A model with ``clicks`` (or a detector-only one, for boxes); its encoder (each plane is
        encoded once, cached planes not at all) and tiling (large planes answered on tiles).
    refs : sequence of SliceRef
        The planes, in order (e.g. :func:`~napari_sam3_onnx.engine.encoding.refs_along_axis`).
    prompts : mapping of plane index -> mapping of key -> Prompt
        The objects of each plane, keyed by ``ref.index``; ``Prompt.clicks(points_rc, labels,
        box_rc)`` takes ``(row, col)`` clicks and an ``(r0, c0, r1, c1)`` box in plane pixels.
        A plane without an entry yields an empty step.
    cancelled : callable, optional
        Cancel token, checked before each plane.

    Yields
    ------
    SegmentStep
        One per plane: the masks by key, and a message per object that could not be answered.

    Examples
    --------
    >>> ws = bundle.workspace()                                   # bundle = api.open_bundle(...)
    >>> refs = api.refs_along_axis(stack, window=(0, 3000))       # stack: (z, rows, cols)
    >>> asks = {(3,): {"cell": api.Prompt.clicks([[40, 61]], [1])}}
    >>> step = next(s for s in api.iter_segment(ws, refs[3:4], asks))
    >>> step.masks["cell"].mask.shape == stack.shape[1:]
    True
    """
    encoder = workspace.encoder
    if encoder is None:
        raise PromptError("Load a model first: segmenting needs a bundle with clicks.")
    texts = workspace.box_texts()
    for n, ref in enumerate(refs):
        if cancelled is not None and cancelled():
            return
        index = tuple(ref.index)
        objects = list(prompts.get(index, {}).items())  # keys are opaque to run_job
        result = run_job(encoder, Job(0, ref, objects, workspace.tiling), texts)  # type: ignore[arg-type]
        yield SegmentStep(index, {key: mask for key, _, mask in result.masks},
                          result.problems, n + 1, len(refs))


def segment(
    model_or_folder: Bundle | Path | str,
    data,
    points_rc=None,
    labels=None,
    box_rc=None,
    *,
    index: Sequence[int] = (),
    axis: int = 0,
    rgb: bool = False,
    window: tuple[float, float] | None = None,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    mask_logits: np.ndarray | None = None,
) -> ObjectMask:
    """Segment one object on one plane from clicks and/or a box (:func:`iter_segment` once).

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle (its cache keeps embeddings across calls), a bundle folder or a
        registry id; with ``clicks`` (or ``boxes`` with ``text``: a box alone, via the
        detector).
    data : array-like
        A 2-D plane or a stack; the plane is ``data[index]`` after moving ``axis`` first.
    points_rc : array-like, optional
        ``(N, 2)`` clicks ``(row, col)`` in slice pixels.
    labels : array-like, optional
        ``(N,)`` 1 = positive (default), 0 = negative.
    box_rc : array-like, optional
        ``(4,)`` box ``(r0, c0, r1, c1)`` in slice pixels.
    index : sequence of int
        Plane index along the leading axes (``()`` for a 2-D image).
    axis, rgb, window
        Slice axis, colour data, contrast window.
    store : EmbeddingStore or path, optional
        Read the plane's embedding from (and write it to) this store.
    image : str
        The image's name in the store.
    mask_logits : numpy.ndarray, optional
        ``low_res_logits`` of a previous result for this object (refinement).

    Returns
    -------
    ObjectMask
        ``mask`` is ``(rows, cols)`` bool. Embeddings stay in ``bundle.cache`` (keyed by the
        plane's content), so more prompts on the same plane cost no encoding.

    Raises
    ------
    PromptError
        The prompt cannot be answered (a degenerate box, no clicks nor box).

    Examples
    --------
    >>> bundle = api.open_bundle("hf-tracker")
    >>> stack = api.read_image("nuclei.tif")                       # (z, rows, cols)
    >>> mask = api.segment(bundle, stack, [[40, 61]], index=(3,), window=(500, 4000)).mask
    >>> mask.shape, mask.dtype                                     # ((rows, cols), bool)
    """
    bundle = as_bundle(model_or_folder)
    view = planes_view(data, axis, rgb)
    index = tuple(int(i) for i in index)
    try:
        plane = extract_plane(view, index, rgb)
    except (IndexError, ValueError) as exc:
        lead = tuple(view.shape[:view.ndim - (3 if rgb else 2)])
        raise InputError(f"index={index} does not name a plane of data whose leading axes are "
                         f"{lead} ({exc}).") from exc
    win = check_window(window)
    pts = np.zeros((0, 2)) if points_rc is None else points_rc
    check_points(pts, labels, plane.shape)
    check_box(box_rc, plane.shape)
    ref = SliceRef(view, index, rgb, win, source=image, data_version=fingerprint(plane))
    prompt = Prompt.clicks(pts, labels, box_rc, mask_logits)
    step = next(iter_segment(bundle.workspace(store, bundle.cache), [ref], {index: {0: prompt}}))
    if step.problems:
        raise PromptError(step.problems[0])
    return step.masks[0]
