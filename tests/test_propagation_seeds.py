"""Choosing and merging propagation seeds, and the texts about a run (no napari)."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx.api.propagation_report import axis_names, stop_text, summary
from napari_sam3_onnx.api.propagation_seeds import (
    label_seeds,
    match_corrections,
    merge_seeds,
    parse_ids,
)
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tracking.types import ObjectTrack, PropagationResult, Seed, Stop
from napari_sam3_onnx.models.errors import PromptError

SHAPE = (7, 10)


def test_parse_ids_and_label_seeds():
    assert parse_ids(" 3, 7;3 12 ") == [3, 7, 12]
    for bad in ("", "three", "0", "-2"):
        with pytest.raises(PromptError):
            parse_ids(bad)
    plane = np.zeros(SHAPE, np.int32)
    plane[1, 1], plane[4, 6] = 3, 8
    seeds = label_seeds(plane, 5, None)
    assert sorted(seeds) == [3, 8] and seeds[8][0].index == 5 and seeds[8][0].mask[4, 6]
    with pytest.raises(PromptError, match="not on this slice"):
        label_seeds(plane, 5, [3, 4])
    with pytest.raises(PromptError, match="no labels"):
        label_seeds(np.zeros(SHAPE, int), 5, None)


def test_corrections_are_matched_by_ids_or_overlap():
    p1, p2 = Prompt.clicks([[1, 1]]), Prompt.clicks([[5, 8]])
    m1, m2 = np.zeros(SHAPE, bool), np.zeros(SHAPE, bool)
    m1[0:3, 0:3], m2[4:7, 6:10] = True, True
    plane = np.zeros(SHAPE, np.int32)
    plane[5, 7], plane[1, 2] = 8, 3
    assert match_corrections([(p1, m1)], plane, [5]) == {5: p1}
    assert match_corrections([(p1, m1), (p2, m2)], plane, [3, 8]) == {3: p1, 8: p2}
    assert match_corrections([(p1, m1), (p2, m2)], plane, [3, 8], hint=[8, 3]) == {8: p1, 3: p2}
    with pytest.raises(PromptError, match="which propagated object"):
        match_corrections([(p1, m1), (p2, m2)], np.zeros(SHAPE, int), [3, 8])


def test_summary_groups_objects_that_stopped_alike():
    end = {"forward": Stop(11, "range-end", 11), "backward": Stop(0, "range-end", 0)}
    gone = {"forward": Stop(9, "absent", 7), "backward": Stop(0, "range-end", 0)}
    res = PropagationResult("memory", {1: ObjectTrack(stops=end), 4: ObjectTrack(stops=gone),
                                       2: ObjectTrack(stops=end)}, encoder_calls=11)
    assert summary(res, "z", 2, 12) == (
        "Done (SAM memory): 12 slice(s) processed (11 newly encoded, 1 from the cache). "
        "objects 1, 2 — up: range "
        "end at z=11; down: range end at z=0. object 4 — up: absent 2 slices in a row, stopped "
        "at z=9, last seen z=7; down: range end at z=0.")


def test_stop_texts_say_why():
    assert stop_text(Stop(10, "absent", 8), "z", 2) == (
        "absent 2 slices in a row, stopped at z=10, last seen z=8")
    assert "mask vanished" in stop_text(Stop(4, "empty-mask", 3), "t", 2)
    assert stop_text(Stop(0, "range-end", 0), "z", 2) == "range end at z=0"
    assert stop_text(Stop(6, "cancelled", 6), "z", 2) == "cancelled at z=6"
    assert stop_text(Stop(0, "range-end", 4), "z", 2) == (
        "reached the range end at z=0, last seen z=4")  # z=0 got nothing
    assert stop_text(Stop(0, "range-end", None), "z", 2) == (
        "reached the range end at z=0, never seen")


def test_a_correction_replaces_the_seed_on_its_slice_and_keeps_the_others():
    a, b, fix = Seed(2, prompt=Prompt.clicks([[1, 1]])), Seed(6, prompt=Prompt.clicks([[3, 4]])), \
        Seed(6, prompt=Prompt.clicks([[5, 5]]))
    merged = merge_seeds({1: [b, a], 2: [a]}, {1: fix})
    assert merged == {1: [a, fix]}  # sorted by slice; object 2 was not corrected
    assert merge_seeds({1: [a]}, {1: fix}) == {1: [a, fix]}


def test_axis_names():
    assert axis_names(1) == ("z",) and axis_names(2) == ("t", "z")
    assert axis_names(3) == ("axis0", "axis1", "axis2")
