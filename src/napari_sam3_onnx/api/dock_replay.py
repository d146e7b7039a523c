"""Replaying the commits of a labels layer saved from the dock (workflow ``"dock"``).

The dock logs each commit of a labels layer (``_napari/commit_log.py``; the keys of an entry are
listed in ``_napari/commit_entries.py``) and "Save labels" records the live entries, in order,
as the provenance prompts ``{"commits": [...]}``. :func:`replay_commits` runs them again on the
image with a bundle, into a new labels array, through the same workflow functions the dock runs
(:func:`~.clicks.segment_object`, :func:`~.search.iter_search`) and the same write rules
(:mod:`~napari_sam3_onnx.engine.labels_merge`), so with the same bundle and data the labels
come out identical.

Replayed: ``"clicks"`` (each object's chain of runs, feeding the logits back as the dock did),
``"refine"``, ``"text"`` (phrases and exemplar boxes), ``"automatic"`` (per plane, linked, or
tracked from a key plane: :func:`~.automatic.iter_segment_refs`,
:func:`~.automatic_tracked.iter_segment_tracked`; the planes the commit wrote, shifted above
the layer's largest id, only onto background) and ``"propagate"``
(:func:`~.propagate.iter_propagate` from the recorded seeds: masks as run lengths, prompts
rebuilt from their chain of click runs; each slice merged by
:func:`~napari_sam3_onnx.engine.labels_merge.propagated`; a cancelled run stops after the
slices it wrote; a re-propagation clears its objects where it no longer reaches).

A layer saved with no dock commit records no replayable step (:func:`replayable`); replay
refuses it with a message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import numpy as np

from ..engine.automatic import AutoMaskSettings
from ..engine.cache import EmbeddingCache
from ..engine.concepts.search import Exemplars
from ..engine.encoding import SliceEncoder, SliceRef, lead_index, refs_along_axis
from ..engine.interactive import ObjectMask, Prompt
from ..engine.label_prompt import replace_label
from ..engine.labels_merge import apply, new_objects, propagated
from ..engine.tiling.tiles import TileSettings
from ..engine.tracking.labels import LabelWriter
from ..engine.tracking.types import Seed
from ..models.base import Capability
from .automatic import AutoStep, iter_segment_refs
from .automatic_tracked import iter_segment_tracked
from .bundles import Bundle
from .clicks import segment_object
from .io import InputError
from .propagate import iter_propagate
from .provenance import Provenance, seeds_from_json
from .refine import pick_label, refine_prompt
from .search import iter_search
from .workspace import Workspace

#: ``workflow`` of a provenance record written by the dock's "Save labels".
DOCK = "dock"
#: Workflows of dock commits that :func:`replay_commits` runs.
REPLAYED = ("clicks", "refine", "text", "automatic", "propagate")
#: Why a record of a layer with no dock commit cannot be replayed.
NOTHING = ("its labels were not made by commits in the dock (painted, opened from a file, or "
           "every commit undone), so it records no replayable step")


def replayable(record: Provenance) -> bool:
    """Whether a ``"dock"`` record holds commits to replay."""
    return bool(record.prompts.get("commits"))


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


def _object_run(ws: Workspace, data, entry: Mapping, obj: Mapping,
                tiling: TileSettings | None,
                plane: Sequence[int] | None = None) -> tuple[Prompt, ObjectMask]:
    """Run one object's chain of prompts, each feeding its logits to the next.

    Returns the last run's prompt (fed-back logits included) and mask; ``plane``: where the
    object is (default the entry's ``plane``).
    """
    points = np.asarray(obj["points"], float).reshape(-1, 2)
    labels = np.asarray(obj["labels"], np.int64)
    box = None if obj.get("box") is None else np.asarray(obj["box"], float)
    ref = _ref(data, entry, entry["plane"] if plane is None else plane, obj.get("region"))
    mask: ObjectMask | None = None
    prompt: Prompt | None = None
    for n in obj.get("chain") or [len(labels)]:
        prompt = Prompt(points[:n], labels[:n], box,
                        None if mask is None else mask.low_res_logits,
                        None if mask is None else mask.region)
        mask = segment_object(_encoder(ws), ref, prompt, ws.box_texts(), tiling)
    assert mask is not None and prompt is not None
    return prompt, mask


def _object_mask(ws: Workspace, data, entry: Mapping, obj: Mapping,
                 tiling: TileSettings | None) -> ObjectMask:
    return _object_run(ws, data, entry, obj, tiling)[1]


def _clicks(ws: Workspace, data, labels: np.ndarray, entry: Mapping,
            tiling: TileSettings | None, notes: list[str]) -> None:
    plane = tuple(int(i) for i in entry["plane"])
    masks = [m.mask for m in (_object_mask(ws, data, entry, o, tiling)
                              for o in entry["objects"]) if m.present]
    values, ids = new_objects(labels[plane], masks, int(labels.max()) + 1,
                              bool(entry.get("overwrite")))
    if ids != [int(i) for i in entry.get("ids", ids)]:  # another bundle lost or gained one
        notes.append(f"the Clicks commit on plane {list(plane)} gave ids {ids}, the recorded "
                     f"one {entry.get('ids')}")
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


def _automatic(ws: Workspace, data, labels: np.ndarray, entry: Mapping) -> None:
    """The run's workflow on its planes; the committed ones merged as the dock's commit."""
    refs = [_ref(data, entry, p) for p in entry["planes"]]
    settings = AutoMaskSettings(**entry["settings"])
    want = {tuple(int(i) for i in p) for p in entry.get("committed", entry["planes"])}
    steps: Iterator[AutoStep]
    if entry.get("mode") == "tracked":
        steps = iter_segment_tracked(ws, refs, int(entry["key"]), settings=settings)
    else:
        embed = partial(_encoder(ws).embed, need=Capability.ENCODE)  # as the tab's
        steps = iter_segment_refs(_encoder(ws).adapter, embed, refs, settings,
                                  entry.get("link_iou"), int(entry.get("first_id", 1)),
                                  ws.tiling)
    planes: list[tuple[tuple[int, ...], np.ndarray]] = []
    for step in steps:
        if tuple(step.index) in want:
            planes.append((tuple(step.index), step.result.labels))
        if len(planes) == len(want):  # a cancelled run committed the planes it had
            break
    shift = int(labels.max())  # ids above the layer's largest, only onto background
    for index, plane in planes:
        labels[index] = apply(labels[index], np.where(plane > 0, plane + shift, 0))


def _seeds(ws: Workspace, data, entry: Mapping, tiling: TileSettings | None
           ) -> dict[int, list[Seed]]:
    """The recorded seeds; a prompt seed from the click preview rebuilt from its chain."""
    seeds = seeds_from_json(entry.get("seeds") or {})
    chains = entry.get("prompts") or {}
    out: dict[int, list[Seed]] = {}
    for oid, items in seeds.items():
        out[oid] = []
        for seed in items:
            obj = chains.get(f"{oid}:{seed.index}")
            if seed.prompt is not None and obj is not None:
                seed = Seed(seed.index, prompt=_object_run(ws, data, entry, obj, tiling,
                                                           obj["plane"])[0])
            out[oid].append(seed)
    return out


def _propagate(ws: Workspace, data, labels: np.ndarray, entry: Mapping,
               tiling: TileSettings | None) -> None:
    """The run from its seeds, each slice merged as the tab's writer; a cancelled run's part."""
    st = entry["settings"]
    axis, fixed = int(st["axis"]), tuple(int(i) for i in st.get("fixed") or ())
    window = entry.get("window")
    refs = refs_along_axis(data, axis, fixed, bool(entry.get("rgb")),
                           None if window is None else (float(window[0]), float(window[1])),
                           "replay", 0)
    span = st.get("range")
    steps = iter_propagate(ws, refs, _seeds(ws, data, entry, tiling),
                           direction=st.get("direction", "both"),
                           index_range=None if span is None else (int(span[0]), int(span[1])),
                           stop_after_absent=st.get("stop_after"))
    complete = bool(entry.get("complete", True))
    limit = None if complete else int(entry.get("steps", 0))
    replace, overwrite = [int(i) for i in st.get("replace") or ()], bool(st.get("overwrite"))
    reached: dict[int, set[int]] = {}
    done = 0
    for step in steps:
        if step.outputs is None:
            continue
        if limit is not None and done >= limit:
            break
        done += 1
        for oid in step.outputs:
            reached.setdefault(int(oid), set()).add(int(step.index))
        if not step.outputs:
            continue
        lead = lead_index(axis, fixed, int(step.index))
        owner = np.zeros((1, *labels.shape[-2:]), np.int32)
        LabelWriter(owner)(0, step.outputs)  # where objects overlap: the highest logit
        labels[lead] = propagated(labels[lead], owner[0], list(step.outputs), replace,
                                  overwrite)
    if complete:  # a re-propagation: its objects go where it no longer reaches
        previous = entry.get("previous") or {}
        for oid in replace:
            for k in sorted(set(previous.get(str(oid), ())) - reached.get(oid, set())):
                lead = lead_index(axis, fixed, int(k))
                labels[lead] = np.where(labels[lead] == oid, 0, labels[lead])


def replay_commits(bundle: Bundle, data, commits: Sequence[Mapping],
                   shape: Sequence[int], notes: list[str] | None = None) -> np.ndarray:
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
    notes : list of str, optional
        Gets what went otherwise than recorded without stopping the replay (a Clicks commit
        whose objects got other ids: another bundle found more or fewer of them).

    Returns
    -------
    numpy.ndarray
        ``shape`` int32 labels.

    Raises
    ------
    InputError
        No commit, or a commit of a workflow that is not replayed.
    """
    if not commits:
        raise InputError(f"nothing to replay: {NOTHING}.")
    labels = np.zeros(tuple(int(s) for s in shape), np.int32)
    workspaces: dict[object, Workspace] = {}
    for k, entry in enumerate(commits):
        workflow = entry.get("workflow")
        if workflow not in REPLAYED:
            raise InputError(f"commit {k + 1} was made by the {workflow!r} tab, which replay "
                             f"does not know (it runs {', '.join(REPLAYED)}).")
        tiling = _tiling(entry)
        ws = workspaces.get(tiling)
        if ws is None:
            ws = workspaces[tiling] = bundle.workspace(None, EmbeddingCache(), tiling)
        if workflow == "clicks":
            _clicks(ws, data, labels, entry, tiling, [] if notes is None else notes)
        elif workflow == "refine":
            _refine(ws, data, labels, entry)
        elif workflow == "automatic":
            _automatic(ws, data, labels, entry)
        elif workflow == "propagate":
            _propagate(ws, data, labels, entry, tiling)
        else:
            _text(ws, data, labels, entry)
    return labels
