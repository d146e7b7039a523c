"""Which objects a propagation carries, chosen from label ids; corrections matched and merged.

Plain functions over label planes, prompts and seeds (no napari): the Propagate tab reads the
planes and the click preview from its layers and hands them here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from ..engine.interactive import Prompt
from ..engine.tracking.types import Seed
from ..models.errors import PromptError


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
        best = max(counts, key=lambda i: counts[i])
        if counts[best] == 0 or best in out:
            raise PromptError("Cannot tell which propagated object this correction is for: type "
                              "its id in 'ids' (one id per corrected object) and try again.")
        out[best] = prompt
    return out


def merge_seeds(old: Mapping[int, Sequence[Seed]], new: Mapping[int, Seed]) -> dict[int, list]:
    """Each corrected object's seeds with the correction replacing any seed on its slice."""
    return {oid: sorted([s for s in old[oid] if s.index != seed.index] + [seed],
                        key=lambda s: s.index)
            for oid, seed in new.items()}
