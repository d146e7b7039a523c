"""3-D objects by propagation: segment one key plane automatically, carry each object through z.

The alternative to linking per-plane results (:mod:`~..engine.automatic.linking`): every object
the automatic generator finds on the key plane becomes a mask seed for
:func:`~.propagate.iter_propagate` (SAM 3's video memory when the bundle has memory graphs, else
the carry-over), so an object keeps its id through z even where a per-plane segmentation would
miss it on a plane or split it in two. The cost is one memory step per object and plane instead
of one automatic segmentation per plane, and only objects present on the key plane are found
(docs/automatic.md, "Stacks").

:func:`iter_segment_tracked` is the one orchestration path, over a
:class:`~.workspace.Workspace`: the dock's Automatic tab ("tracked from key plane"), the API's
:func:`segment_all_tracked` and the CLI's ``segment-all --propagate-from`` all consume it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from scipy import ndimage

from ..engine.automatic import AutoInstance, AutoMaskSettings, AutoResult
from ..engine.cache import EmbeddingCache
from ..engine.encoding import SliceRef
from ..engine.store.embedding_store import EmbeddingStore
from ..engine.tiling.tiles import TileSettings, as_tiling
from ..engine.tracking.labels import LabelWriter
from ..engine.tracking.propagation import STACK_NEEDED, PropagationStep
from ..engine.tracking.types import Method, PropagationResult, Seed
from ..models.base import Capability
from ..models.errors import PromptError
from .automatic import AutoStep, auto_table_rows, iter_segment_refs
from .bundles import Bundle, as_bundle
from .jobs import StackJob
from .propagate import check_stop_after, iter_propagate
from .workspace import Workspace


@dataclass
class TrackedRun:
    """How a tracked segmentation ended (the return value of :func:`iter_segment_tracked`).

    Attributes
    ----------
    key : int
        The key plane (position in ``refs``).
    rows : list of dict
        The key plane's automatic table rows (score, stability, area there, box).
    propagation : PropagationResult or None
        How each object's passes ended, the method used ("memory" or "carry-over") and the
        run's encoder calls; None when the key plane held no object or the run was cancelled
        while the key plane was being segmented.
    cancelled : bool
        The cancel token stopped the run (the planes yielded so far are complete).
    """

    key: int
    rows: list[dict] = field(default_factory=list)
    propagation: PropagationResult | None = None
    cancelled: bool = False

    @property
    def method(self) -> Method | None:
        """The propagation method used (None: nothing was propagated)."""
        return None if self.propagation is None else self.propagation.method


def check_key(key: int, n: int) -> int:
    """``key`` as an int inside a stack of ``n`` planes (which must be a stack).

    Raises
    ------
    PromptError
        Fewer than two planes, or ``key`` outside ``0 .. n - 1``.
    """
    if n < 2:
        raise PromptError(STACK_NEEDED)
    key = int(key)
    if not 0 <= key < n:
        raise PromptError(f"key plane {key} is outside the stack's {n} planes (0 to {n - 1}).")
    return key


def plane_instances(labels: np.ndarray, index: tuple[int, ...],
                    key_objects: dict[int, AutoInstance]) -> list[AutoInstance]:
    """The objects of one tracked plane (the key plane's scores, this plane's area and box).

    Parameters
    ----------
    labels : numpy.ndarray
        ``(rows, cols)`` int32 labels of the plane (ids are the key plane's).
    index : tuple of int
        The plane's leading indices.
    key_objects : dict
        The key plane's instances by id.
    """
    out = []
    for k, sl in enumerate(ndimage.find_objects(labels), 1):
        if sl is None or k not in key_objects:
            continue
        key = key_objects[k]
        area = int(np.count_nonzero(labels[sl] == k))
        box = (sl[0].start, sl[1].start, sl[0].stop - 1, sl[1].stop - 1)
        out.append(AutoInstance(k, key.score, key.stability, area, tuple(index), box))
    return out


def iter_segment_tracked(
    workspace: Workspace,
    refs: Sequence[SliceRef],
    key: int,
    *,
    settings: AutoMaskSettings | None = None,
    stop_after_absent: int | None = 2,
    cancelled: Callable[[], bool] | None = None,
) -> Generator[AutoStep, None, TrackedRun]:
    """Segment plane ``key`` of ``refs`` automatically, carry its objects through ``refs``.

    Parameters
    ----------
    workspace : Workspace
        A model with ``clicks`` (with ``memory`` the objects are tracked with SAM 3's video
        memory, otherwise by prompt carry-over), its encoder (the key plane is encoded once for
        both steps; planes another workflow or a store already encoded are not encoded again)
        and its tiling (applied to the key plane's automatic segmentation).
    refs : sequence of SliceRef
        The planes along the walked axis, in order (at least two).
    key : int
        The position in ``refs`` of the plane segmented automatically.
    settings : AutoMaskSettings, optional
        The automatic generator's settings (default SAM's).
    stop_after_absent : int or None
        Stop an object after this many planes without it (None: never).
    cancelled : callable, optional
        Cancel token, checked between decoder batches of the key plane and before each plane
        of the propagation; planes yielded so far are complete.

    Yields
    ------
    AutoStep
        The key plane first (its objects as the propagation's seed slice decodes them), then
        every other plane as a pass reaches it, once each: ``index`` is the plane's
        ``SliceRef.index``, ``result.labels`` its ``(rows, cols)`` int32 labels with the key
        plane's ids (ids ``1..k``, one per object through the stack), ``result.instances`` one
        per object present there (score and stability of the key plane), ``done`` / ``total``
        planes, ``tiles`` the tiles the key plane was segmented in (its step only; the
        propagated planes are decoded whole: 1).

    Returns
    -------
    TrackedRun

    Raises
    ------
    PromptError
        No model, fewer than two planes, ``key`` outside them, a bad ``stop_after_absent``.
    MissingCapabilityError
        The model has no SAM head (clicks).

    Examples
    --------
    >>> ws = bundle.workspace()
    >>> refs = api.refs_along_axis(stack, window=(500, 4000))   # stack: (z, rows, cols)
    >>> for step in api.iter_segment_tracked(ws, refs, key=20):  # objects of z = 20, carried
    ...     out[step.index] = step.result.labels
    """
    encoder, adapter = workspace.encoder, workspace.adapter
    if encoder is None or adapter is None:
        raise PromptError("Load a model first: tracked segmentation needs a bundle with clicks.")
    adapter.require(Capability.CLICKS)
    refs = list(refs)
    key = check_key(key, len(refs))
    check_stop_after(stop_after_absent)
    run = TrackedRun(key)
    embed = partial(encoder.embed, need=Capability.ENCODE)  # the automatic workflow's encoder
    autos = list(iter_segment_refs(adapter, embed, [refs[key]], settings, None, 1,
                                   workspace.tiling, cancelled))
    if not autos:  # cancelled on the key plane
        run.cancelled = True
        return run
    auto = autos[0].result
    run.rows = auto_table_rows(auto)
    objects = {int(i.id): i for i in auto.instances}
    seeds = {oid: Seed.from_mask(key, auto.labels == oid) for oid in objects}
    key_tiles = autos[0].tiles  # the key plane's automatic step may be tiled; the rest not
    if not seeds:
        yield AutoStep(tuple(refs[key].index), AutoResult(auto.labels), 1, len(refs), key_tiles)
        return run
    # The model the key plane was segmented with, even if the dock attaches another meanwhile.
    same = Workspace.for_encoder(encoder, workspace.folder or Path(), workspace.tiling)
    steps = iter_propagate(same, refs, seeds, stop_after_absent=stop_after_absent,
                           cancelled=cancelled)
    done = 0
    while True:
        try:
            step: PropagationStep = next(steps)
        except StopIteration as stop:
            run.propagation = stop.value
            break
        if step.outputs is None:  # a pass walking the key plane: its seed step came first
            continue
        # One seed slice per object, all on the key plane: each plane arrives once, so its
        # labels are final (the rule of the headless LabelWriter: highest logit wins).
        plane = np.zeros(refs[step.index].plane_shape, np.int32)
        LabelWriter(plane[np.newaxis])(0, step.outputs)
        done += 1
        index = tuple(refs[step.index].index)
        yield AutoStep(index, AutoResult(plane, plane_instances(plane, index, objects)), done,
                       len(refs), key_tiles if step.index == key else 1)
    run.cancelled = run.propagation.cancelled
    return run


@dataclass
class TrackedSegmentation:
    """Labels of objects found on a key plane and propagated through the stack.

    Attributes
    ----------
    labels : numpy.ndarray
        ``(n, rows, cols)`` int32, one id per object through z (0 = background).
    key : int
        The key plane (position along the slice axis).
    rows : list of dict
        The key plane's automatic table rows (score, stability, area there, box).
    propagation : PropagationResult or None
        How each object's passes ended (None when the key plane held no object).
    table : list of dict
        One row per object and plane it lies on (the key plane's score and stability, that
        plane's area and box; columns :func:`~.automatic.auto_table_columns` with one leading
        axis), in the order the planes were reached.
    """

    labels: np.ndarray
    key: int
    rows: list[dict] = field(default_factory=list)
    propagation: PropagationResult | None = None
    table: list[dict] = field(default_factory=list)


def segment_all_tracked(
    model_or_folder: Bundle | Path | str,
    data,
    *,
    key: int | None = None,
    settings: AutoMaskSettings | None = None,
    axis: int = 0,
    window: tuple[float, float] | None = None,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    tile: TileSettings | int | None = None,
    stop_after_absent: int | None = 2,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    out=None,
) -> TrackedSegmentation:
    """Automatic objects of the ``key`` plane, each carried through a 3-D stack.

    :func:`iter_segment_tracked` run to its end into a label stack.

    Parameters
    ----------
    model_or_folder : Bundle, path or str
        An opened bundle, a bundle folder or a registry id.
        A bundle with ``clicks`` (``memory`` for SAM 3's video memory).
    data : array-like or path
        ``(n, rows, cols)`` gray stack after moving ``axis`` first.
    key : int, optional
        The plane segmented automatically (default the middle one, ``n // 2``).
    settings, axis, window, store, image, tile
        As in :func:`~.automatic.segment_all` (the store and the in-memory cache are shared by
        both steps, so the key plane is encoded once).
    stop_after_absent : int or None
        As in :func:`~.propagate.propagate`.
    progress : callable, optional
        ``progress(done, total)`` in planes.
    cancelled : callable, optional
        Cancel token; the planes finished are kept.
    out : array-like, optional
        Where to write the labels: ``(n, rows, cols)`` int32, all zeros (e.g. a ``.npy``
        memmap, so the stack is never held whole); default a new numpy array.

    Examples
    --------
    >>> res = api.segment_all_tracked("hf-tracker", stack, key=20, window=(500, 4000))
    >>> res.labels.shape == stack.shape, res.labels.dtype          # (z, rows, cols) int32

    Raises
    ------
    PromptError
        Not a 3-D stack, or ``key`` outside it.
    """
    bundle = as_bundle(model_or_folder)
    job = StackJob(data, image, axis, window=window)
    view = job.view()
    if view.ndim != 3:
        raise PromptError(f"segment_all_tracked takes an (n, rows, cols) stack; got shape "
                          f"{tuple(view.shape)} (use segment_all for 2-D or 4-D data).")
    n = int(view.shape[0])
    key = check_key(n // 2 if key is None else key, n)
    workspace = bundle.workspace(store, EmbeddingCache(), as_tiling(tile))
    labels = np.zeros(view.shape, np.int32) if out is None else out
    if tuple(labels.shape) != tuple(view.shape):
        raise PromptError(f"out= has shape {tuple(labels.shape)}; the labels are "
                          f"{tuple(view.shape)}.")
    table: list[dict] = []
    steps = iter_segment_tracked(workspace, job.refs(view), key, settings=settings,
                                 stop_after_absent=stop_after_absent, cancelled=cancelled)
    while True:
        try:
            step = next(steps)
        except StopIteration as stop:
            run: TrackedRun = stop.value
            break
        labels[step.index] = step.result.labels
        table.extend(auto_table_rows(step.result))
        if progress is not None:
            progress(step.done, step.total)
    return TrackedSegmentation(labels, key, run.rows, run.propagation, table)
