"""A propagation's outcome for people: method, axis names, why each object's passes stopped."""

from __future__ import annotations

from ..engine.tracking.types import Method, PropagationResult, Stop

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


def method_text(method: Method) -> str:
    """The name of a propagation method as the tab shows it."""
    return METHOD_TEXT[method]
