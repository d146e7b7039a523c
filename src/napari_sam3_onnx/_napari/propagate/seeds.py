"""Which objects a propagation carries: the click preview, or label ids on the current slice.

Also the checks and texts the Propagate tab shows (why Run is off, method, stop reasons), so
the panel module stays about widgets. The click session's preview is read through
:func:`preview_objects`, the one place that knows its internals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from napari_sam3_onnx._napari.layers import plane_shape
from napari_sam3_onnx._napari.workers import describe
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tracking.propagation import STACK_NEEDED
from napari_sam3_onnx.engine.tracking.types import Method, PropagationResult, Seed, Stop
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.errors import PromptError

METHOD_TEXT = {
    "memory": "SAM memory (memory graphs)",
    "carry-over": "prompt carry-over (this bundle has no memory graphs — lighter, less robust)",
}
#: Engine pass names -> what the tab calls the directions.
PASS_TEXT = {"forward": "up", "backward": "down"}


def axis_names(n_lead: int) -> tuple[str, ...]:
    """Names of an image's leading axes: ``("z",)``, ``("t", "z")`` or ``axis0, ...``."""
    if n_lead == 1:
        return ("z",)
    if n_lead == 2:
        return ("t", "z")
    return tuple(f"axis{i}" for i in range(n_lead))


def run_problem(adapter, encoder, image) -> str:
    """Why a propagation cannot start with this model and image ('' if it can)."""
    if adapter is None or encoder is None:
        return "Load a model above to propagate."
    if not adapter.has(Capability.CLICKS):
        return "This bundle has no SAM head (clicks); propagation needs one."
    if image is None:
        return "Choose an image in 'Clicks & boxes'."
    if len(plane_shape(image)) < 3:
        return STACK_NEEDED
    return ""


def parse_ids(text: str) -> list[int]:
    """Object ids from text such as ``"3, 7"`` or ``"3 7"`` (order kept, duplicates dropped).

    Raises
    ------
    PromptError
        Nothing given, or something other than positive integers.
    """
    parts = [p for p in re.split(r"[,;\s]+", text.strip()) if p]
    if not parts:
        raise PromptError("Type the label ids to propagate, e.g. '3, 7'.")
    bad = [p for p in parts if not p.isdigit() or int(p) <= 0]
    if bad:
        raise PromptError(f"Label ids are positive whole numbers; not {', '.join(bad)}.")
    return list(dict.fromkeys(int(p) for p in parts))


def label_seeds(plane: np.ndarray, k: int, ids: Sequence[int] | None) -> dict[int, list[Seed]]:
    """Mask seeds on slice ``k`` from a labels plane (``ids`` None: every label on it).

    Raises
    ------
    PromptError
        An id is not on this slice, or the slice has no labels at all.
    """
    plane = np.asarray(plane)
    present = [int(i) for i in np.unique(plane) if i > 0]
    if ids is None:
        if not present:
            raise PromptError("There are no labels on this slice of the target layer to carry.")
        ids = present
    missing = [i for i in ids if i not in present]
    if missing:
        raise PromptError(f"Label id(s) {', '.join(map(str, missing))} are not on this slice of "
                          "the target layer; move to a slice that has them.")
    return {int(i): [Seed.from_mask(k, plane == i)] for i in ids}


def preview_objects(session, index: tuple[int, ...]) -> list[tuple[Prompt, np.ndarray]]:
    """``(prompt, mask)`` of each object the click session previews on plane ``index``.

    Raises
    ------
    PromptError
        The preview is still being computed, or there is none on this plane.
    """
    busy = PromptError("The click preview is still being updated; try again when it shows.")
    if session.pending:
        raise busy
    previewed = session.previewed(index)
    if previewed is None:
        raise busy  # a newer prompt's result was dropped or is on its way
    found = [(prompt, mask.mask) for prompt, mask in previewed]
    if not found:
        raise PromptError("There is no previewed object on this slice: click on an object or "
                          "draw a box in the 'Clicks & boxes' tab first, or choose label ids "
                          "or all labels on this slice for objects already committed.")
    return found


def preview_seeds(session, index: tuple[int, ...], k: int, labels) -> dict[int, list[Seed]]:
    """The previewed objects as prompt seeds on slice ``k``, under new ids (``max + 1``, ...)."""
    objects = preview_objects(session, index)
    first = int(np.max(labels)) + 1 if labels.size else 1
    return {first + j: [Seed(k, prompt=p)] for j, (p, _) in enumerate(objects)}


def match_corrections(
    objects: Sequence[tuple[Prompt, np.ndarray]], plane: np.ndarray, run_ids: Sequence[int],
    hint: Sequence[int] = (),
) -> dict[int, Prompt]:
    """Which propagated object each previewed correction is for.

    One object in the last run: that one. Otherwise the ids in ``hint`` (the ids field), in
    order, if they are as many as the corrections and all in the run; otherwise, per
    correction, the run's object it overlaps most on this slice.

    Raises
    ------
    PromptError
        A correction cannot be matched, or two corrections match one object.
    """
    run_ids = [int(i) for i in run_ids]
    if len(run_ids) == 1 and len(objects) == 1:
        return {run_ids[0]: objects[0][0]}
    if len(hint) == len(objects) and all(i in run_ids for i in hint):
        return {int(i): p for i, (p, _) in zip(hint, objects, strict=True)}
    out: dict[int, Prompt] = {}
    for prompt, mask in objects:
        counts = {i: int((mask & (plane == i)).sum()) for i in run_ids}
        best = max(counts, key=counts.get)
        if counts[best] == 0 or best in out:
            raise PromptError("Cannot tell which propagated object this correction is for: type "
                              "its id in 'ids' (one id per corrected object) and try again.")
        out[best] = prompt
    return out


def stop_text(stop: Stop, axis: str, limit: int | None) -> str:
    """Why one pass of one object ended, for people."""
    seen = "" if stop.last_present is None else f", last seen {axis}={stop.last_present}"
    if stop.reason == "absent":
        n = f"{limit} slices" if limit and limit > 1 else "a slice"
        return f"absent {n} in a row, stopped at {axis}={stop.index}{seen}"
    if stop.reason == "empty-mask":
        return f"mask vanished, stopped at {axis}={stop.index}{seen}"
    if stop.reason == "range-end":
        if stop.last_present == stop.index:
            return f"range end at {axis}={stop.index}"
        # the pass went on to the end of the range without finding the object there
        return f"reached the range end at {axis}={stop.index}{seen or ', never seen'}"
    return f"cancelled at {axis}={stop.index}"


def summary(result: PropagationResult, axis: str, limit: int | None, slices: int) -> str:
    """The status line after a run: method, slices, per object and direction why it stopped.

    ``slices`` counts the slices the run gave an output on; objects that stopped for the same
    reasons at the same slices share one entry.
    """
    head = "Cancelled" if result.cancelled else "Done"
    groups: dict[str, list[int]] = {}
    for oid, track in sorted(result.objects.items()):
        why = "; ".join(f"{PASS_TEXT[d]}: {stop_text(s, axis, limit)}"
                        for d, s in sorted(track.stops.items(), key=lambda kv: kv[0] != "forward"))
        groups.setdefault(why or "seed slice only", []).append(oid)
    parts = [f"object{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} — {why}"
             for why, ids in groups.items()]
    fresh = min(result.encoder_calls, slices)  # this run's encodes are of slices it processed
    encoded = "all from the cache" if not fresh else "all newly encoded" if fresh == slices \
        else f"{fresh} newly encoded, {slices - fresh} from the cache"
    method = "SAM memory" if result.method == "memory" else "prompt carry-over"
    return f"{head} ({method}): {slices} slice(s) processed ({encoded}). " + ". ".join(parts) + "."


def finished_message(result: PropagationResult | None, error: BaseException | None, writer,
                     axis: str, limit: int | None) -> str:
    """The status line when a run has ended (``writer``: its :class:`RunWriter`)."""
    if error is not None:
        kept = f" {len(writer.written)} slice(s) written before it are kept." \
            if writer.written else ""
        return describe(error) + kept
    if result is None:
        return "The run ended without a result."
    reached = set().union(*writer.slices.values()) if writer.slices else set()
    return summary(result, axis, limit, len(reached))


def method_text(method: Method) -> str:
    """The name of a propagation method as the tab shows it."""
    return METHOD_TEXT[method]


def merge_seeds(old: Mapping[int, Sequence[Seed]], new: Mapping[int, Seed]) -> dict[int, list]:
    """Each corrected object's seeds with the correction replacing any seed on its slice."""
    return {oid: sorted([s for s in old[oid] if s.index != seed.index] + [seed],
                        key=lambda s: s.index)
            for oid, seed in new.items()}
