"""The commit-log entries of each tab: what made a commit, as JSON (see ``commit_log``).

An entry names the workflow, the plane(s), the prompts and the settings, and the bundle (its
folder and layout; "Save labels" hashes the files, ``api/provenance.py``). A replay of a saved
layer (``api/dock_replay.py``) runs the entries in order, with the same write rules
(``engine/labels_merge.py``). Keys, by workflow:

* ``"clicks"``: ``plane``; ``objects`` (one per committed object, in commit order: ``points``
  ``[[row, col], ...]``, ``labels`` 1 = positive / 0 = negative, ``box`` ``[r0, c0, r1, c1]`` or
  None, ``feedback`` whether the last run fed the previous mask back, ``region`` the encoded
  field of view or None); ``overwrite``; ``ids`` (set by the writer);
* ``"refine"``: ``plane``, ``label_id`` and the object's prompt (``objects``);
* ``"text"``: ``planes`` (searched, in order), ``concepts``, ``exemplars`` (per plane: boxes
  and polarity), ``floor``, ``min_area``, ``fill_holes``, ``link_iou``, ``first_id``, ``new``
  (a layer of the run's own);
* ``"automatic"``: ``planes`` (the run's, in order), ``settings`` (the generator's),
  ``link_iou``, ``first_id``, ``mode`` (``"linked"`` or ``"tracked"``), ``key`` (a tracked
  run's key plane: its position in ``planes``) and ``committed`` (the planes the commit
  wrote);
* ``"propagate"``: ``seeds`` (per object id: prompts or masks as run lengths,
  ``api/provenance.py``), ``prompts`` (the click chains of prompt seeds), ``settings`` (axis,
  fixed, direction, range, stop_after, overwrite, replace), ``previous``, ``steps`` and
  ``complete``.

Every entry has ``window`` (the contrast window the model saw), ``rgb``, ``tiling`` and
``bundle``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt


def _num(value: Any) -> Any:
    """JSON values from numpy scalars, arrays and tuples."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_num(v) for v in value]
    return value


def _source(image) -> str | None:
    path = getattr(getattr(image, "source", None), "path", None)
    return None if path is None else str(path)


def base(workflow: str, workspace, image) -> dict:
    """The keys every entry has: workflow, bundle, window, rgb and tiling of the workspace."""
    from napari_sam3_onnx._napari.layers import contrast_window

    adapter, folder = workspace.adapter, workspace.folder
    tiling = getattr(workspace, "tiling", None)
    return {"workflow": workflow,
            "bundle": {"folder": None if folder is None else str(folder.resolve()),
                       "layout": getattr(adapter, "layout", None),
                       "precision": getattr(adapter, "precision", None)},
            "window": _num(contrast_window(image)), "rgb": bool(image.rgb),
            "tiling": None if tiling is None else asdict(tiling),
            "image": {"name": str(image.name), "path": _source(image),
                      "shape": [int(s) for s in image.data.shape]}}


def prompt_json(prompt: Prompt, mask: ObjectMask | None, chain: Sequence[int] | None,
                fov: bool) -> dict:
    """One object's prompt: clicks with polarity, box, the chain of runs, the field of view.

    ``chain``: the click counts of the runs that led to this mask, each feeding its logits to
    the next (SAM's refinement); None: unknown (one run with every click is assumed).
    """
    box = None if prompt.box_rc is None else [float(v) for v in np.ravel(prompt.box_rc)]
    region = None if mask is None or not fov else getattr(mask, "region", None)
    n = len(np.ravel(prompt.labels))
    return {"points": np.asarray(prompt.points_rc, float).reshape(-1, 2).tolist(),
            "labels": [int(v) for v in np.ravel(prompt.labels)], "box": box,
            "chain": [int(c) for c in chain] if chain else [n],
            "feedback": prompt.mask_logits is not None,
            "region": None if region is None else [int(v) for v in region]}


def _objects(session, keys: Sequence[tuple], fov: bool) -> list[dict]:
    chains = getattr(session, "chains", {})
    return [prompt_json(session._last[k][0], session._last[k][1], chains.get(k), fov)
            for k in keys]


def click_entry(session, plane: Sequence[int], overwrite: bool) -> dict:
    """The Clicks commit of the previewed objects of ``session`` on ``plane``."""
    keys = [k for k, (_p, m) in session._last.items() if m.present]
    return {**base("clicks", session.workspace, session.layers.image),
            "plane": [int(i) for i in plane], "overwrite": bool(overwrite),
            "objects": _objects(session, keys, bool(getattr(session.view, "fov", False)))}


def refine_entry(session, plane: Sequence[int], label_id: int) -> dict:
    """The refinement of ``label_id`` on ``plane`` with the session's last prompt."""
    keys = [session.key] if session.key in session._last else []
    return {**base("refine", session.workspace, session.layers.image),
            "plane": [int(i) for i in plane], "label_id": int(label_id),
            "objects": _objects(session, keys, False)}  # refinement: the whole plane


def text_entry(workspace, image, indices: Sequence[Sequence[int]], concepts: Sequence[str],
               options: Mapping, new: bool) -> dict:
    """A text run over ``indices`` with the panel's ``options`` (as handed to the search)."""
    exemplars = options.get("exemplars") or {}
    return {**base("text", workspace, image),
            "planes": [[int(i) for i in index] for index in indices],
            "concepts": [str(c) for c in concepts],
            "exemplars": [{"plane": [int(i) for i in index], "boxes": _num(ex.boxes_rc),
                           "positive": [bool(v) for v in np.ravel(ex.positive)]}
                          for index, ex in exemplars.items()],
            "floor": float(options["floor"]), "min_area": int(options["min_area"]),
            "fill_holes": bool(options["fill_holes"]), "link_iou": options.get("link_iou"),
            "first_id": int(options["first_id"]), "new": bool(new)}


def automatic_entry(workspace, image, refs: Sequence, settings: Mapping,
                    link_iou: float | None, key: int | None) -> dict:
    """An Automatic run as it starts (:func:`committed` adds the planes its commit wrote).

    ``refs``: the run's planes, in order (a tracked run: the planes along the walked axis);
    ``settings``: the generator's (``asdict(AutoMaskSettings)``); ``link_iou``: the per-plane
    mode's linking (None: not linked); ``key``: a tracked run's key plane, a position in
    ``refs`` (None: per plane). Made when the run starts, so the window and tiling are the
    run's.
    """
    return {**base("automatic", workspace, image),
            "planes": [[int(i) for i in ref.index] for ref in refs],
            "settings": {str(k): _num(v) for k, v in settings.items()},
            "link_iou": None if link_iou is None else float(link_iou), "first_id": 1,
            "mode": "linked" if key is None else "tracked",
            "key": None if key is None else int(key)}


def committed(entry: Mapping, planes: Sequence[Sequence[int]]) -> dict:
    """``entry`` with the planes its commit wrote (a cancelled run's are a part of its own)."""
    return {**entry, "committed": [[int(i) for i in index] for index in planes]}


def preview_prompt(session, prompt: Prompt, plane: Sequence[int]) -> dict | None:
    """The click preview's prompt ``prompt`` on ``plane`` as :func:`prompt_json` writes it.

    The chain of runs that led to it is kept, so a replay builds the very prompt (fed-back
    logits included) the propagation was seeded with. None: not the session's preview.
    """
    for key, (p, mask) in session._last.items():
        if p is prompt:
            chains = getattr(session, "chains", {})
            fov = bool(getattr(session.view, "fov", False))
            return {**prompt_json(p, mask, chains.get(key), fov),
                    "plane": [int(i) for i in plane]}
    return None


def seed_prompts(session, seeds: Mapping[int, Sequence], plane: Sequence[int]) -> dict:
    """``{"oid:k": prompt json}`` of the prompt seeds on slice ``k`` taken from the preview."""
    out = {}
    for oid, items in seeds.items():
        for seed in items:
            found = None if seed.prompt is None else preview_prompt(session, seed.prompt, plane)
            if found is not None:
                out[f"{int(oid)}:{int(seed.index)}"] = found
    return out


def propagate_entry(workspace, spec) -> dict:
    """A propagation run of a ``RunSpec``: seeds per object (as the CLI records them), settings.

    ``prompts`` holds the click-preview chains of prompt seeds (:func:`seed_prompts`, keyed
    ``"oid:k"``); ``previous`` the slices a re-propagation's objects were on before it (they
    are cleared where it no longer reaches). :func:`propagate_finished` adds how it ended.
    """
    from napari_sam3_onnx.api.provenance import seeds_to_json

    return {**base("propagate", workspace, spec.image),
            "seeds": seeds_to_json(spec.seeds),
            "prompts": dict(getattr(spec, "prompts", {}) or {}),
            "previous": {str(int(o)): sorted(int(k) for k in ks)
                         for o, ks in spec.previous.items()},
            "settings": {"axis": int(spec.axis), "fixed": [int(i) for i in spec.fixed],
                         "direction": str(spec.direction),
                         "range": _num(spec.index_range), "stop_after": spec.stop_after,
                         "overwrite": bool(spec.overwrite),
                         "replace": sorted(int(i) for i in spec.replace)}}


def propagate_finished(entry: Mapping, steps: int, complete: bool) -> dict:
    """``entry`` with the slices written (``steps``) and whether the run completed."""
    return {**entry, "steps": int(steps), "complete": bool(complete)}
