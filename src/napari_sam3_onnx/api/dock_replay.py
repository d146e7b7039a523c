"""Replaying the commits of a labels layer saved from the dock (workflow ``"dock"``).

The dock logs each commit of a labels layer (``_napari/commit_log.py``; the keys of an entry are
listed in ``_napari/commit_entries.py``) and "Save labels" records the live entries, in order,
as the provenance prompts ``{"commits": [...]}``. :func:`replay_commits` runs them again on the
image with a bundle, into a new labels array, through the same workflow functions the dock runs
(:func:`~.clicks.segment_object`, :func:`~.search.iter_search`) and the same write rules
(:mod:`~napari_sam3_onnx.engine.labels_merge`), so with the same bundle and data the labels
come out identical.

Replayed: ``"clicks"`` (each object's chain of runs, feeding the logits back as the dock did),
``"refine"`` and ``"text"`` (phrases and exemplar boxes). An Automatic or Propagate commit is
refused with a message (its record is kept, the replay is not written yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..engine.cache import EmbeddingCache
from ..engine.concepts.search import Exemplars
from ..engine.encoding import SliceEncoder, SliceRef
from ..engine.interactive import ObjectMask, Prompt
from ..engine.label_prompt import replace_label
from ..engine.labels_merge import apply, new_objects
from ..engine.tiling.tiles import TileSettings
from .bundles import Bundle
from .clicks import segment_object
from .io import InputError
from .refine import pick_label, refine_prompt
from .search import iter_search
from .workspace import Workspace

#: ``workflow`` of a provenance record written by the dock's "Save labels".
DOCK = "dock"
#: Workflows of dock commits that :func:`replay_commits` runs.
REPLAYED = ("clicks", "refine", "text")


def _encoder(ws: Workspace) -> SliceEncoder:
    if ws.encoder is None:
        raise InputError("the bundle gave no encoder")
    return ws.encoder


def _ref(data, entry: Mapping, plane: Sequence[int], region=None) -> SliceRef:
    window = entry.get("window")
    return SliceRef(data=data, index=tuple(int(i) for i in plane), rgb=bool(entry.get("rgb")),
                    window=None if window is None else (float(window[0]), float(window[1])),
                    source="replay", data_version=0,
                    region=None if region is None else (int(region[0]), int(region[1]),
                                                        int(region[2]), int(region[3])))


def _object_mask(ws: Workspace, data, entry: Mapping, obj: Mapping,
                 tiling: TileSettings | None) -> ObjectMask:
    """Run one object's chain of prompts, each feeding its logits to the next."""
    points = np.asarray(obj["points"], float).reshape(-1, 2)
    labels = np.asarray(obj["labels"], np.int64)
    box = None if obj.get("box") is None else np.asarray(obj["box"], float)
    ref = _ref(data, entry, entry["plane"], obj.get("region"))
    mask: ObjectMask | None = None
    for n in obj.get("chain") or [len(labels)]:
        prompt = Prompt(points[:n], labels[:n], box,
                        None if mask is None else mask.low_res_logits,
                        None if mask is None else mask.region)
        mask = segment_object(_encoder(ws), ref, prompt, ws.box_texts(), tiling)
    assert mask is not None
    return mask


def _clicks(ws: Workspace, data, labels: np.ndarray, entry: Mapping,
            tiling: TileSettings | None) -> None:
    plane = tuple(int(i) for i in entry["plane"])
    masks = [m.mask for m in (_object_mask(ws, data, entry, o, tiling)
                              for o in entry["objects"]) if m.present]
    values, ids = new_objects(labels[plane], masks, int(labels.max()) + 1,
                              bool(entry.get("overwrite")))
    if ids != [int(i) for i in entry.get("ids", ids)]:
        raise InputError(f"replaying the Clicks commit on plane {list(plane)} gave ids {ids}, "
                         f"the recorded one {entry.get('ids')}")
    labels[plane] = apply(labels[plane], values, values > 0, overwrite=True)


def _refine(ws: Workspace, data, labels: np.ndarray, entry: Mapping) -> None:
    """The label's own outline as the mask prompt, then the chain of clicks (as the dock)."""
    plane = tuple(int(i) for i in entry["plane"])
    if not entry["objects"]:
        raise InputError(f"the refinement on plane {list(plane)} records no prompt")
    obj = entry["objects"][0]
    target = pick_label(_encoder(ws).adapter, labels[plane], int(entry["label_id"]), plane)
    points = np.asarray(obj["points"], float).reshape(-1, 2)
    clicks = np.asarray(obj["labels"], np.int64)
    ref = _ref(data, entry, plane)
    previous: tuple[Prompt, ObjectMask] | None = None
    for n in obj.get("chain") or [len(clicks)]:
        prompt = refine_prompt(target, points[:n], clicks[:n], previous)
        previous = (prompt, segment_object(_encoder(ws), ref, prompt))
    assert previous is not None
    labels[plane] = replace_label(labels[plane], target.label_id, previous[1].mask)


def _text(ws: Workspace, data, labels: np.ndarray, entry: Mapping) -> None:
    planes = [tuple(int(i) for i in p) for p in entry["planes"]]
    exemplars = {tuple(int(i) for i in e["plane"]): Exemplars(
        np.asarray(e["boxes"], float).reshape(-1, 4), np.asarray(e["positive"], bool))
        for e in entry.get("exemplars") or []}
    first_id = int(entry["first_id"])
    if entry.get("new"):
        labels[...] = 0  # a run's own layer: the run's result replaces what it held
    steps = list(iter_search(ws, [_ref(data, entry, p) for p in planes], entry["concepts"],
                             floor=float(entry["floor"]), exemplars=exemplars or None,
                             min_area=int(entry["min_area"]),
                             fill_holes=bool(entry["fill_holes"]), first_id=first_id,
                             link_iou=entry.get("link_iou"), warn_long=False))
    if entry.get("new"):
        for step in steps:
            labels[step.index] = step.result.labels
        return
    shift = max(0, int(labels.max()) + 1 - first_id)  # as the dock's text output
    for step in steps:
        plane = tuple(step.index)
        values = np.where(step.result.labels > 0, step.result.labels + shift, 0)
        labels[plane] = apply(labels[plane], values)


def _tiling(entry: Mapping) -> TileSettings | None:
    tiling = entry.get("tiling")
    return None if tiling is None else TileSettings(**tiling)


def replay_commits(bundle: Bundle, data, commits: Sequence[Mapping],
                   shape: Sequence[int]) -> np.ndarray:
    """Run the commits in order into new labels.

    Parameters
    ----------
    bundle : Bundle
        The model to run (the recorded one for an identical result).
    data : array-like
        The image, ``(..., rows, cols[, channels])`` as the dock had it.
    commits : sequence of mapping
        The recorded entries (``prompts["commits"]`` of a ``"dock"`` record).
    shape : sequence of int
        The labels' shape (the image's without a colour axis).

    Returns
    -------
    numpy.ndarray
        ``shape`` int32 labels.

    Raises
    ------
    InputError
        A commit of a workflow that is not replayed, or one that gives other ids.
    """
    labels = np.zeros(tuple(int(s) for s in shape), np.int32)
    workspaces: dict[object, Workspace] = {}
    for k, entry in enumerate(commits):
        workflow = entry.get("workflow")
        if workflow not in REPLAYED:
            raise InputError(f"commit {k + 1} was made by the {workflow!r} tab, which replay "
                             f"does not run yet (it runs {', '.join(REPLAYED)}).")
        tiling = _tiling(entry)
        ws = workspaces.get(tiling)
        if ws is None:
            ws = workspaces[tiling] = bundle.workspace(None, EmbeddingCache(), tiling)
        if workflow == "clicks":
            _clicks(ws, data, labels, entry, tiling)
        elif workflow == "refine":
            _refine(ws, data, labels, entry)
        else:
            _text(ws, data, labels, entry)
    return labels
