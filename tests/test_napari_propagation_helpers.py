"""The Propagate tab's writer and seed helpers (napari layers, no viewer needed)."""

from __future__ import annotations

import numpy as np
import pytest
from napari.layers import Labels

from napari_sam3_onnx._napari.propagate.seeds import (
    label_seeds,
    match_corrections,
    parse_ids,
    stop_text,
)
from napari_sam3_onnx._napari.propagate.writer import RunWriter, lead_index
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tracking.steps import SliceOutput
from napari_sam3_onnx.engine.tracking.types import Stop
from napari_sam3_onnx.models.errors import PromptError

SHAPE = (7, 10)


def out(rows, cols, logit=5.0):
    mask = np.zeros(SHAPE, bool)
    mask[rows, cols] = True
    return SliceOutput(mask, np.full((4, 4), logit, np.float32), 2.0, 0.9)


def test_lead_index_walks_one_axis_of_several():
    assert lead_index(1, (4,), 2) == (4, 2)
    assert lead_index(0, (4,), 2) == (2, 4)
    assert lead_index(0, (), 3) == (3,)


def test_writer_respects_other_objects_and_makes_one_undo_step():
    layer = Labels(np.zeros((3, 2, *SHAPE), np.int32))  # (T, Z, rows, cols): walk t at z=1
    layer.data[1, 1, 0:2, 0:3] = 9  # another object
    before = layer.data.copy()
    w = RunWriter(layer, 0, (1,), overwrite=False)
    w.write(0, {4: out(slice(0, 3), slice(0, 5))})
    w.write(1, {4: out(slice(0, 3), slice(0, 5))})
    assert (layer.data[1, 1, 0:2, 0:3] == 9).all() and (layer.data[1, 1, 2, 0:5] == 4).all()
    assert not layer.data[:, 0].any()  # z=0 never touched
    layer.data[0, 1, 0, 0] = 7  # the user paints over one written pixel meanwhile
    assert w.finish() == 15 + (15 - 6) - 1  # both slices, less the 9s, less the painted
    assert w.finish() == 0  # closed
    assert len(layer._undo_history) == 1
    layer.undo()
    expected = before.copy()
    expected[0, 1, 0, 0] = 7  # the user's paint is theirs, not the run's
    np.testing.assert_array_equal(layer.data, expected)


def test_writer_overwrite_replace_and_clear():
    layer = Labels(np.zeros((2, *SHAPE), np.int32))
    layer.data[0, 0, :] = 9
    layer.data[0, 5, :] = 4  # the object's earlier result, to be replaced
    w = RunWriter(layer, 0, (), overwrite=True, replace=[4])
    w.write(0, {4: out(slice(0, 2), slice(0, 2))})
    plane = layer.data[0]
    assert (plane[0:2, 0:2] == 4).all() and (plane[0, 2:] == 9).all()
    assert not (plane[5] == 4).any()  # replaced, not layered on top
    layer.data[1, 3, 3] = 4
    w.clear(1, [4])
    assert not (layer.data[1] == 4).any()
    assert w.slices == {4: {0}} and w.written == {0, 1}


def test_contested_pixels_go_to_the_higher_logit():
    layer = Labels(np.zeros((1, *SHAPE), np.int32))
    w = RunWriter(layer, 0, (), overwrite=False)
    w.write(0, {1: out(slice(0, 4), slice(0, 4), 1.0), 2: out(slice(2, 6), slice(2, 6), 3.0)})
    assert (layer.data[0, 2:6, 2:6] == 2).all() and layer.data[0, 0, 0] == 1


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
    from napari_sam3_onnx._napari.propagate.seeds import summary
    from napari_sam3_onnx.engine.tracking.types import ObjectTrack, PropagationResult

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
