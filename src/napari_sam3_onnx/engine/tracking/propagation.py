"""Carry objects slice to slice through z (or t) with SAM 3's video memory.

Order (docs/layouts.md#propagation-order): every seed slice is decoded and memory-encoded first
(conditioning slices, no memory). The forward pass starts at the earliest seed slice and runs to the
end of the range; the backward pass starts at each object's earliest seed slice (at its latest with
``direction="backward"``) and runs to the start. Both passes write into one memory bank per object,
keyed by slice, so the backward pass sees the forward pass's memories next to the start. A pass that
meets another seed slice of an object reuses that slice's output (and revives the object if it had
stopped). Each slice is encoded once and shared by all objects.

A correction is a re-run with one more seed: the bank starts afresh from the seeds, so every
tracked slice is recomputed against the new conditioning slices rather than patched
(embeddings come from the cache, so nothing is encoded twice). When a pass reaches a seed slice
other than the one the object started from, the rest of that pass ignores the object's tracked
memories within ``num_maskmem * r`` slices behind it (SAM's ``clear_non_cond_mem_around_input``:
the old view of the object is not mixed with the correction; SAM 2 deletes them from the bank it
tracks with, SAM 3 only from its per-object copies). They stay in the bank for the other pass,
so the backward pass still sees the forward pass's memories at its start, as upstream does.

Bundles without memory graphs fall back to prompt carry-over (``method="carry-over"``): each
slice is prompted with the previous slice's mask as a box, a positive click at its most interior
pixel and, where the decoder accepts one, the decoder's own logits as a mask prompt.

Both methods run the same pass loop (:class:`_Run`); what differs is the tracker
(:mod:`.propagation_trackers`): what a seed slice leaves behind, how a tracked slice is decoded,
and what its bank does when a pass meets a correction or moves on.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tracking.steps import SliceOutput
from napari_sam3_onnx.engine.tracking.trackers import Tracker, memory_score, tracker_for
from napari_sam3_onnx.engine.tracking.types import (
    Direction,
    ObjectTrack,
    PropagationResult,
    Seed,
    Stop,
    StopReason,
)
from napari_sam3_onnx.models.base import Capability, SamAdapter
from napari_sam3_onnx.models.errors import PromptError

__all__ = ["PropagationResult", "PropagationStep", "Seed", "iter_propagate", "memory_score",
           "propagate"]
NAMES = {1: "forward", -1: "backward"}
STACK_NEEDED = ("Propagation needs a stack (z or t): this image is 2-D. Open a 3-D (or 4-D) "
                "image, or segment this slice with clicks instead.")
#: One pass: ``(sign, first slice, {object: slices where it starts or revives})``.
Pass = tuple[int, int, dict[int, set[int]]]


@dataclass(frozen=True)
class PropagationStep:
    """One slice of a propagation, as the run reaches it.

    Attributes
    ----------
    index : int
        The slice (its position in ``refs_by_index``).
    outputs : dict[int, SliceOutput] or None
        Per object id, its output on this slice; None when the pass walked the slice without
        decoding anything (every live object is seeded there).
    done, total : int
        Slices the passes have walked so far (seed slices, decoded first, count 0), and in all.
    seed : bool
        A seed slice (decoded before the passes).
    """

    index: int
    outputs: dict[int, SliceOutput] | None
    done: int
    total: int
    seed: bool = False


@dataclass
class _Live:
    """A live object within one pass."""

    last: int
    prev: SliceOutput | None  # the last output with a mask (carry-over source)
    last_present: int | None
    run: int  # consecutive slices without the object


def _live_from(out: SliceOutput, index: int) -> _Live:
    ok = out.present
    return _Live(index, out if ok else None, index if ok else None, 0 if ok else 1)


def _refs(refs_by_index: Mapping[int, SliceRef] | Sequence[SliceRef]) -> dict[int, SliceRef]:
    refs = (dict(refs_by_index) if isinstance(refs_by_index, Mapping)
            else dict(enumerate(refs_by_index)))
    if len(refs) < 2 or any(len(r.index) == 0 for r in refs.values()):
        raise PromptError(STACK_NEEDED)
    if set(refs) != set(range(min(refs), max(refs) + 1)):
        raise ValueError("refs_by_index must hold every slice between its first and last index")
    return {int(k): v for k, v in refs.items()}


def _seeds(seeds: Mapping[int, Seed | Sequence[Seed]], lo: int, hi: int) -> dict[int, list[Seed]]:
    out: dict[int, list[Seed]] = {}
    for oid, given in seeds.items():
        items = [given] if isinstance(given, Seed) else list(given)
        idx = [s.index for s in items]
        if not items or len(set(idx)) != len(idx):
            raise PromptError(f"Object {oid}: give one prompt or mask per seed slice.")
        if any(not lo <= i < hi for i in idx):
            raise PromptError(f"Object {oid}: seed slice(s) {idx} lie outside the range "
                              f"{lo}..{hi - 1}.")
        out[int(oid)] = sorted(items, key=lambda s: s.index)
    if not out:
        raise PromptError("Select at least one object (clicks, a box or a mask) to propagate.")
    return out


def _plan(direction: Direction, conds: dict[int, list[int]]) -> list[tuple[int, int, dict]]:
    """``(sign, first slice, {object: slices where it starts or revives})`` per pass."""
    if direction not in ("both", "forward", "backward"):
        raise ValueError(f"direction must be 'both', 'forward' or 'backward', not {direction!r}")
    passes = []
    if direction != "backward":
        passes.append((1, min(min(c) for c in conds.values()),
                       {o: set(c) for o, c in conds.items()}))
    if direction == "both":
        passes.append((-1, max(min(c) for c in conds.values()),
                       {o: {min(c)} for o, c in conds.items()}))
    elif direction == "backward":
        passes.append((-1, max(max(c) for c in conds.values()),
                       {o: set(c) for o, c in conds.items()}))
    return passes


def _ahead(starts: dict[int, set[int]], index: int, sign: int) -> bool:
    """Some object still starts or revives beyond ``index`` in the pass's direction."""
    return any((i - index) * sign > 0 for w in starts.values() for i in w)


def _pending(oid: int, index: int, sign: int, later: list[Pass]) -> list[tuple[int, int]]:
    """``(slice, sign)`` steps still to run for ``oid``: this pass's next, the later passes'."""
    return [(index + sign, sign)] + [(b + s2, s2) for s2, _, w in later for b in w.get(oid, ())]


@dataclass
class _Run:
    """One propagation's shared state: the tracker, the slices, and what is recorded."""

    tracker: Tracker
    encoder: SliceEncoder
    refs: dict[int, SliceRef]
    result: PropagationResult
    keep_outputs: bool
    limit: int | None
    cond_out: dict[int, dict[int, SliceOutput]] = field(default_factory=dict)

    def record(self, oid: int, index: int, out: SliceOutput) -> None:
        """Keep ``out`` in the result (unless the caller only listens to ``on_slice``)."""
        if self.keep_outputs:
            self.result.objects[oid].outputs[index] = out

    def seed_slices(self, objs: dict[int, list[Seed]]
                    ) -> Iterator[tuple[int, dict[int, SliceOutput]]]:
        """Decode every seed slice first (conditioning slices, no memory); yield each."""
        self.cond_out = {o: {} for o in objs}
        for index in sorted({s.index for ss in objs.values() for s in ss}):
            emb = self.encoder.embed(self.refs[index], Capability.MEMORY)
            outs = {}
            for oid, ss in objs.items():
                seed = next((s for s in ss if s.index == index), None)
                if seed is None:
                    continue
                out = self.tracker.decode_seed(oid, index, emb, seed)
                self.cond_out[oid][index] = outs[oid] = out
                self.record(oid, index, out)
            yield index, outs

    def run_pass(self, step: Pass, span: range, later: list[Pass],
                 cancelled: Callable[[], bool] | None
                 ) -> Iterator[tuple[int, dict[int, SliceOutput] | None, int]]:
        """Walk ``span`` with the pass's objects; yield ``(slice, outputs, slices iterated)``."""
        sign, _, starts = step
        name, iterated = NAMES[sign], 0
        live: dict[int, _Live] = {}
        begun: set[int] = set()
        for index in span:
            if cancelled is not None and cancelled():
                self.result.cancelled = True
                self._stop_all(live, name, "cancelled")
                return
            self._begin(index, sign, starts, live, begun)
            if not live and not _ahead(starts, index, sign):
                break
            iterated += 1
            yield index, self._track_slice(index, sign, live, later), iterated
        self._stop_all(live, name, "range-end")

    def _stop_all(self, live: dict[int, _Live], name: str, reason: StopReason) -> None:
        for oid, st in live.items():
            self.result.objects[oid].stops[name] = Stop(st.last, reason, st.last_present)

    def _begin(self, index: int, sign: int, starts: dict[int, set[int]],
               live: dict[int, _Live], begun: set[int]) -> None:
        """Start (or revive) the objects seeded on ``index`` from their seed output."""
        for oid, where in starts.items():
            if index in where:
                if oid in begun:  # a correction met mid-pass
                    self.tracker.meet_seed(oid, index, sign)
                begun.add(oid)
                live[oid] = _live_from(self.cond_out[oid][index], index)

    def _track_slice(self, index: int, sign: int, live: dict[int, _Live],
                     later: list[Pass]) -> dict[int, SliceOutput] | None:
        """Decode the live objects that are not seeded on ``index`` (one encode for all).

        Returns their outputs, or None when nothing was decoded here.
        """
        todo = [o for o in live if index not in self.cond_out[o]]
        if not todo:
            return None
        emb = self.encoder.embed(self.refs[index], Capability.MEMORY)
        outs: dict[int, SliceOutput] = {}
        for oid in todo:
            if self._track_object(oid, index, sign, emb, live[oid], later, outs):
                del live[oid]
        self.result.visited.append((index, sign))
        return outs

    def _track_object(self, oid: int, index: int, sign: int, emb, st: _Live,
                      later: list[Pass], outs: dict[int, SliceOutput]) -> bool:
        """Decode one object on one slice; True when its pass stops here."""
        out = self.tracker.track(oid, index, sign, emb, st.prev)
        reason: StopReason = "absent"
        if out is not None:
            outs[oid] = out
            self.record(oid, index, out)
            if out.present:
                st.prev, st.last_present, st.run = out, index, 0
            else:
                st.run += 1
                reason = "absent" if out.object_score <= 0 else "empty-mask"
        st.last = index
        self.tracker.moved_on(oid, _pending(oid, index, sign, later))
        if out is None or (self.limit is not None and st.run >= self.limit):
            self.result.objects[oid].stops[NAMES[sign]] = Stop(index, reason, st.last_present)
            return True
        return False


def iter_propagate(
    adapter: SamAdapter,
    encoder: SliceEncoder,
    refs_by_index: Mapping[int, SliceRef] | Sequence[SliceRef],
    seeds: Mapping[int, Seed | Sequence[Seed]],
    direction: Direction = "both",
    index_range: tuple[int, int] | None = None,
    stop_after_absent: int | None = 2,
    cancelled: Callable[[], bool] | None = None,
    fill_hole_area: int = 0,
    keep_outputs: bool = True,
) -> Generator[PropagationStep, None, PropagationResult]:
    """Propagate several objects through a stack, yielding each slice as it is reached.

    The seed slices come first (``seed=True``), then one step per slice each pass walks. The
    generator's return value (``StopIteration.value``; napari's ``returned`` signal) is the
    :class:`PropagationResult`. Parameters as in :func:`propagate`.
    """
    refs = _refs(refs_by_index)
    lo, hi = index_range if index_range is not None else (min(refs), max(refs) + 1)
    lo, hi = max(int(lo), min(refs)), min(int(hi), max(refs) + 1)
    objs = _seeds(seeds, lo, hi)
    tracker = tracker_for(adapter, objs, max(refs) + 1, fill_hole_area)
    calls0 = encoder.thread_encoder_calls()  # the run's own encodes (other tabs share it)
    result = PropagationResult(
        tracker.method,
        {o: ObjectTrack(conditioning=tuple(s.index for s in ss)) for o, ss in objs.items()})
    result.banks = tracker.banks
    limit = stop_after_absent if stop_after_absent and stop_after_absent > 0 else None
    run = _Run(tracker, encoder, refs, result, keep_outputs, limit)
    plan = _plan(direction, {o: [s.index for s in ss] for o, ss in objs.items()})
    spans = [range(start, hi if sign > 0 else lo - 1, sign) for sign, start, _ in plan]
    total, done = sum(len(r) for r in spans), 0
    for index, seeded in run.seed_slices(objs):
        yield PropagationStep(index, seeded, 0, total, seed=True)
    for p, (step, span) in enumerate(zip(plan, spans, strict=True)):
        for index, tracked, n in run.run_pass(step, span, plan[p + 1:], cancelled):
            yield PropagationStep(index, tracked, done + n, total)
        done += len(span)
        if result.cancelled:
            break
    result.encoder_calls = encoder.thread_encoder_calls() - calls0
    return result


def propagate(
    adapter: SamAdapter,
    encoder: SliceEncoder,
    refs_by_index: Mapping[int, SliceRef] | Sequence[SliceRef],
    seeds: Mapping[int, Seed | Sequence[Seed]],
    direction: Direction = "both",
    index_range: tuple[int, int] | None = None,
    stop_after_absent: int | None = 2,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    on_slice: Callable[[int, dict[int, SliceOutput]], None] | None = None,
    fill_hole_area: int = 0,
    keep_outputs: bool = True,
) -> PropagationResult:
    """Propagate several objects through a stack (:func:`iter_propagate` run to its end).

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with clicks; with :attr:`Capability.MEMORY` it tracks with SAM's memory,
        otherwise by prompt carry-over.
    encoder : SliceEncoder
        Encodes (and caches) slices through ``adapter``.
    refs_by_index : mapping int -> SliceRef, or sequence of SliceRef
        The slices along the propagation axis (for 4-D data, the caller picks the axis).
    seeds : mapping object id -> Seed or sequence of Seed
        Each object's prompted slices (clicks/box or a mask); several seeds per object are
        conditioning slices (corrections).
    direction : {"both", "forward", "backward"}
        Passes to run (``both``: forward first, then backward, sharing one bank).
    index_range : (int, int), optional
        Half-open ``[start, stop)`` range of slices to visit (default: all).
    stop_after_absent : int or None
        Stop an object after this many consecutive slices without it (None: never).
    progress : callable, optional
        ``(done, total)`` after each slice.
    cancelled : callable, optional
        Checked before each slice; True ends the run with the slices done so far.
    on_slice : callable, optional
        ``(slice, {object id: SliceOutput})`` once per decoded slice (seed slices included).
    fill_hole_area : int
        Hole filling (low-res pixels) on tracked slices' outputs (SAM 3's tracker: 0); seed
        slices use the click path's rule, memories always get the unfilled logits.
    keep_outputs : bool
        Keep every slice's output in the result (False: only ``on_slice`` sees them).

    Returns
    -------
    PropagationResult

    Raises
    ------
    PromptError
        A 2-D image, no seeds, a seed outside the range or a bad seed mask.
    """
    steps = iter_propagate(adapter, encoder, refs_by_index, seeds, direction, index_range,
                           stop_after_absent, cancelled, fill_hole_area, keep_outputs)
    return drive(steps, on_slice, progress)


def drive(
    steps: Generator[PropagationStep, None, PropagationResult],
    on_slice: Callable[[int, dict[int, SliceOutput]], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PropagationResult:
    """Run a propagation generator to its end, handing each step to the callbacks.

    ``on_slice(slice, outputs)`` for each decoded slice, ``progress(done, total)`` after each
    slice a pass walks (and ``(total, total)`` at the end unless cancelled).
    """
    total = 0
    while True:
        try:
            step = next(steps)
        except StopIteration as stop:
            result: PropagationResult = stop.value
            break
        total = step.total
        if on_slice is not None and step.outputs is not None:
            on_slice(step.index, step.outputs)
        if progress is not None and not step.seed:
            progress(step.done, step.total)
    if progress is not None and not result.cancelled:
        progress(total, total)
    return result
