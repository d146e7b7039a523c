"""Exemplars from labels, through the stack: "find every object like these" (API, CLI, dock).

Labels a user already has become SAM 3 exemplar boxes (:func:`exemplars_from_labels`): chosen
ids positive, other ids negative, each on the plane it lies on. :func:`search_from_labels` is
the one workflow:

1. SAM 3's exemplar search (with text concepts, if given) runs on each plane that holds
   exemplars, with that plane's exemplars only: upstream pools an exemplar from its own image,
   and no exemplar is carried to another plane as a token (that is not SAM 3's behaviour).
2. With ``through_stack``, every instance found there is a mask seed of the propagation
   workflow (:func:`~.propagate.iter_propagate`: SAM 3's memory tracker where the bundle has
   one, as the Automatic tab's tracked mode does; else the prompt carry-over).
3. Linking: on a plane with its own exemplars, an instance found there and an object tracked
   from another exemplar plane that overlaps it (IoU >= ``link_iou``) are one object. Each
   object's mask on a plane comes from the track whose seed is nearest in z, so the result has
   one id per object through the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..engine.cache import EmbeddingCache
from ..engine.concepts.search import DEFAULT_FLOOR, Exemplars
from ..engine.encoding import SliceRef
from ..engine.label_prompt import label_box
from ..engine.tracking.types import Method, Seed
from ..models.base import Capability
from ..models.errors import PromptError
from .bundles import Bundle, as_bundle
from .io import InputError, planes_view
from .jobs import StackJob
from .propagate import iter_propagate
from .search import iter_search
from .validate import check_window
from .workspace import Workspace

__all__ = ["ExemplarSearch", "exemplars_from_labels", "search_from_labels", "search_like"]

#: A tracked mask kept as its bounding box and the bool crop inside it.
Crop = tuple[int, int, np.ndarray]


def exemplars_from_labels(
    labels: np.ndarray, positive: Sequence[int] | None = None, negative: Sequence[int] = (),
    *, others_negative: bool = False, max_per_plane: int | None = None,
) -> tuple[dict[int, Exemplars], list[str]]:
    """Exemplar boxes per plane from an ``(n, rows, cols)`` integer labels stack.

    Parameters
    ----------
    labels : numpy.ndarray
        ``(n, rows, cols)`` labels (0 = background).
    positive : sequence of int, optional
        Ids whose boxes say "more like this" (None: every id).
    negative : sequence of int
        Ids whose boxes say "not this".
    others_negative : bool
        Every other id on a plane with a positive exemplar is a negative one.
    max_per_plane : int, optional
        The detector's exemplar slots: planes with more boxes keep the first ones (positives
        first, in id order) and a note says so.

    Returns
    -------
    exemplars : dict
        Plane position -> :class:`Exemplars`, for each plane holding a positive exemplar.
    notes : list of str
        What was left out.
    """
    pos = None if positive is None else {int(i) for i in positive}
    neg = {int(i) for i in negative}
    if pos is not None and pos & neg:
        raise PromptError(f"Label id(s) {sorted(pos & neg)} are both positive and negative.")
    out: dict[int, Exemplars] = {}
    notes: list[str] = []
    for z in range(labels.shape[0]):
        plane = np.asarray(labels[z])
        ids = [int(i) for i in np.unique(plane) if i > 0]
        yes = [i for i in ids if (pos is None and i not in neg) or (pos is not None and i in pos)]
        if not yes:
            continue
        no = [i for i in ids if i not in yes and (i in neg or others_negative)]
        chosen = [(i, True) for i in yes] + [(i, False) for i in no]
        if max_per_plane is not None and len(chosen) > max_per_plane:
            notes.append(f"plane {z}: {len(chosen)} exemplars, the bundle takes "
                         f"{max_per_plane}; the first {max_per_plane} were used.")
            chosen = chosen[:max_per_plane]
        boxes = [label_box(plane == i) for i, _ in chosen]
        out[z] = Exemplars(np.array(boxes, np.float64).reshape(-1, 4),
                           np.array([p for _, p in chosen], bool))
    if not out:
        raise PromptError("No positive exemplar: none of the chosen label ids is in the labels.")
    return out, notes


@dataclass
class ExemplarSearch:
    """What :func:`search_from_labels` found.

    Attributes
    ----------
    labels : numpy.ndarray
        ``(n, rows, cols)`` int32, one id per object (through z with ``through_stack``).
    planes : list of int
        The planes searched with their own exemplars.
    found : dict[int, int]
        Instances the search found per searched plane.
    method : str or None
        "memory" or "carry-over" when objects were carried through z (None: not carried).
    notes : list of str
        Exemplars left out, and the like.
    cancelled : bool
        The cancel token stopped the run (what is in ``labels`` is complete per plane).
    """

    labels: np.ndarray
    planes: list[int] = field(default_factory=list)
    found: dict[int, int] = field(default_factory=dict)
    method: Method | None = None
    notes: list[str] = field(default_factory=list)
    cancelled: bool = False

    @property
    def objects(self) -> int:
        """Distinct object ids in the result (counted per plane: ``labels`` may be a memmap)."""
        planes = self.labels if self.labels.ndim == 3 else self.labels[None]
        ids: set[int] = set()
        for plane in planes:
            ids.update(np.unique(plane).tolist())
        return len(ids - {0})


def _crop_iou(a: Crop, b: Crop) -> float:
    """IoU of two cropped masks, computed on the overlap of their boxes only."""
    (ra, ca, ma), (rb, cb, mb) = a, b
    r0, c0 = max(ra, rb), max(ca, cb)
    r1, c1 = min(ra + ma.shape[0], rb + mb.shape[0]), min(ca + ma.shape[1], cb + mb.shape[1])
    inter = 0
    if r1 > r0 and c1 > c0:
        inter = int(np.count_nonzero(ma[r0 - ra:r1 - ra, c0 - ca:c1 - ca]
                                     & mb[r0 - rb:r1 - rb, c0 - cb:c1 - cb]))
    union = int(np.count_nonzero(ma)) + int(np.count_nonzero(mb)) - inter
    return inter / union if union else 0.0


def _crop(mask: np.ndarray) -> Crop | None:
    rr, cc = np.nonzero(mask)
    if rr.size == 0:
        return None
    r0, c0 = int(rr.min()), int(cc.min())
    return r0, c0, mask[r0:rr.max() + 1, c0:cc.max() + 1].copy()


def _groups(seeds: Mapping[int, int], masks: Mapping[tuple[int, int], Crop],
            link_iou: float) -> dict[int, int]:
    """Object -> group: an instance and an overlapping track from another plane are one."""
    parent = {o: o for o in seeds}

    def root(o: int) -> int:
        while parent[o] != o:
            parent[o] = parent[parent[o]]
            o = parent[o]
        return o

    for oid, k in seeds.items():
        mine = masks[(oid, k)]
        for other, k2 in seeds.items():
            if k2 != k and (other, k) in masks and root(other) != root(oid):
                if _crop_iou(mine, masks[(other, k)]) >= link_iou:
                    parent[root(oid)] = root(other)
    return {o: root(o) for o in seeds}


def _compose(out: np.ndarray, seeds: Mapping[int, int],
             masks: Mapping[tuple[int, int], Crop], group: Mapping[int, int]) -> np.ndarray:
    """``out`` ``(n, rows, cols)`` int32, rewritten per plane: each group's nearest-seed track."""
    roots = sorted(set(group.values()), key=lambda r: (seeds[r], r))
    ids = {r: k + 1 for k, r in enumerate(roots)}
    for z in range(out.shape[0]):
        out[z] = 0
        for r in roots:
            members = [o for o in seeds if group[o] == r and (o, z) in masks]
            if not members:
                continue
            best = min(members, key=lambda o: (abs(seeds[o] - z), o))
            r0, c0, m = masks[(best, z)]
            window = out[z, r0:r0 + m.shape[0], c0:c0 + m.shape[1]]  # a view: written in place
            window[m & (window == 0)] = ids[r]
    return out


def _target(out: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """``out`` zeroed plane by plane (checked), or a new zeroed int32 array of ``shape``."""
    if out is None:
        return np.zeros(shape, np.int32)
    if tuple(out.shape) != shape or out.dtype != np.int32:
        raise ValueError(f"out is {out.dtype} {tuple(out.shape)}; the labels need int32 {shape}")
    for z in range(shape[0]):
        out[z] = 0
    return out


def search_from_labels(
    workspace: Workspace,
    refs: Sequence[SliceRef],
    exemplars: Mapping[int, Exemplars],
    concepts: Sequence[str] = (),
    *,
    through_stack: bool = False,
    floor: float = DEFAULT_FLOOR,
    min_area: int = 0,
    link_iou: float = 0.5,
    stop_after_absent: int | None = 2,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out: np.ndarray | None = None,
) -> ExemplarSearch:
    """Exemplar search on the exemplars' planes, optionally carried and linked through z.

    Parameters
    ----------
    workspace : Workspace
        A model with ``exemplars`` (with ``through_stack`` also ``clicks``; ``memory`` for SAM
        3's tracker).
    refs : sequence of SliceRef
        The planes along the stack axis, in order.
    exemplars : mapping of int to Exemplars
        Plane position (in ``refs``) -> its exemplar boxes (:func:`exemplars_from_labels`).
    concepts : sequence of str
        Text concepts searched together with the exemplars (empty: exemplars alone).
    through_stack : bool
        Carry the instances through ``refs`` and link them (module docstring); False: only the
        exemplar planes get labels.
    floor, min_area
        As in :func:`~.search.iter_search`.
    link_iou : float
        Overlap at which a found instance and a track from another plane are one object.
    stop_after_absent : int or None
        As in :func:`~.propagate.iter_propagate`.
    progress, cancelled : callable, optional
        ``progress(done, total)`` in steps (searched planes, then propagated planes);
        ``cancelled()`` True stops between planes.
    out : numpy.ndarray, optional
        ``(len(refs), rows, cols)`` int32 array the labels are written into, plane by plane
        (e.g. a ``.npy`` memmap, so no labels stack is held in memory); it becomes the result's
        ``labels``. Default: a new array.

    Raises
    ------
    MissingCapabilityError
        No exemplar search, or no SAM head for ``through_stack``.
    PromptError
        An exemplar plane outside ``refs``.
    """
    if workspace.adapter is None:
        raise PromptError("Load a model first.")
    workspace.adapter.require(Capability.EXEMPLARS)
    if through_stack:
        workspace.adapter.require(Capability.CLICKS)
    refs = list(refs)
    planes = sorted(int(k) for k in exemplars)
    if not planes or planes[0] < 0 or planes[-1] >= len(refs):
        raise PromptError(f"Exemplar planes {planes} are not planes of the {len(refs)} given.")
    shape = refs[0].plane_shape
    run = ExemplarSearch(_target(out, (len(refs), *shape)), planes)
    by_index = {tuple(refs[k].index): exemplars[k] for k in planes}
    steps = iter_search(workspace, [refs[k] for k in planes], list(concepts), floor=floor,
                        exemplars=by_index, min_area=min_area, cancelled=cancelled)
    for k, step in zip(planes, steps, strict=False):
        run.labels[k] = step.result.labels
        run.found[k] = len(step.result.instances)
        if progress is not None:
            progress(step.done, len(planes))
    if len(run.found) < len(planes):
        run.cancelled = True
    if not through_stack or run.cancelled or not any(run.found.values()):
        return run
    seeds_at = {int(i): k for k in planes for i in np.unique(run.labels[k]) if i > 0}
    seeds = {o: Seed.from_mask(k, run.labels[k] == o) for o, k in seeds_at.items()}
    masks: dict[tuple[int, int], Crop] = {}
    gen = iter_propagate(workspace, refs, seeds, stop_after_absent=stop_after_absent,
                         cancelled=cancelled)
    while True:
        try:
            tracked = next(gen)
        except StopIteration as stop:
            result = stop.value
            break
        for oid, output in (tracked.outputs or {}).items():
            crop = _crop(output.mask)
            if crop is not None:
                masks[(int(oid), int(tracked.index))] = crop
            else:
                masks.pop((int(oid), int(tracked.index)), None)
        if progress is not None and not tracked.seed:
            progress(len(planes) + tracked.done, len(planes) + tracked.total)
    for o, k in seeds_at.items():  # an instance is its own mask on its own plane
        masks[(o, k)] = _crop(run.labels[k] == o)  # type: ignore[assignment]
    group = _groups(seeds_at, masks, link_iou)
    run.labels = _compose(run.labels, seeds_at, masks, group)
    run.method, run.cancelled = result.method, bool(result.cancelled)
    return run


def search_like(
    model_or_folder: Bundle | Path | str,
    data,
    labels,
    positive: Sequence[int] | None = None,
    negative: Sequence[int] = (),
    *,
    others_negative: bool = False,
    concepts: Sequence[str] = (),
    through_stack: bool = False,
    window: tuple[float, float] | None = None,
    floor: float = DEFAULT_FLOOR,
    min_area: int = 0,
    link_iou: float = 0.5,
    stop_after_absent: int | None = 2,
    store=None,
    image: str = "image",
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out: np.ndarray | None = None,
) -> ExemplarSearch:
    """Find every object like the labelled ones (the headless API of :func:`search_from_labels`).

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id.
        A bundle with ``exemplars`` (``clicks`` too for ``through_stack``).
    data : array-like
        ``(rows, cols)`` image or ``(n, rows, cols)`` gray stack.
    labels : array-like
        Integer labels of the same shape: the exemplars (read plane by plane: a memmap or a
        lazy :func:`~.io.read_image` view stays on disk).
    positive, negative, others_negative
        As in :func:`exemplars_from_labels`.
    concepts, through_stack, floor, min_area, link_iou, stop_after_absent, progress, cancelled
        As in :func:`search_from_labels`.
    window, store, image
        Contrast window; embedding store; the image's name in it.
    out : numpy.ndarray, optional
        int32 array of the input's shape the labels are written into (see
        :func:`search_from_labels`).

    Returns
    -------
    ExemplarSearch
        ``labels`` has the input's shape (``(rows, cols)`` for a 2-D image).

    Examples
    --------
    >>> res = api.search_like(bundle, stack, my_labels, positive=[4, 9], through_stack=True)
    >>> res.labels.shape, res.objects                            # (z, rows, cols) int32, count
    """
    bundle = as_bundle(model_or_folder)
    view = planes_view(data, 0)
    if view.ndim not in (2, 3):
        raise InputError(f"search_like takes a (rows, cols) image or an (n, rows, cols) stack; "
                         f"got shape {tuple(view.shape)}.")
    flat = view.ndim == 2
    lab = labels if hasattr(labels, "shape") and hasattr(labels, "dtype") else np.asarray(labels)
    if tuple(lab.shape) != tuple(view.shape) or not np.issubdtype(lab.dtype, np.integer):
        raise InputError(f"The labels have shape {tuple(lab.shape)} and dtype {lab.dtype}; the "
                         f"image needs integer labels of shape {tuple(view.shape)}.")
    if flat:
        if through_stack:
            raise PromptError("through_stack needs a stack; this is one plane.")
        view, lab = StackJob(np.asarray(data)[None], image).view(), np.asarray(lab)[None]
        out = None if out is None else out[None]
    job = StackJob(view, image, window=check_window(window))
    workspace = bundle.workspace(store, EmbeddingCache())
    slots = workspace.adapter.concept_detector.max_exemplars if workspace.adapter else None
    exemplars, notes = exemplars_from_labels(lab, positive, negative,
                                             others_negative=others_negative,
                                             max_per_plane=slots or None)
    run = search_from_labels(workspace, job.refs(job.view()), exemplars, concepts,
                             through_stack=through_stack, floor=floor, min_area=min_area,
                             link_iou=link_iou, stop_after_absent=stop_after_absent,
                             progress=progress, cancelled=cancelled, out=out)
    run.notes[:0] = notes
    if flat:
        run.labels = run.labels[0]
    return run
