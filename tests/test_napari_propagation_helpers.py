"""The Propagate tab's writer (napari layers, no viewer needed)."""

from __future__ import annotations

import numpy as np
from napari.layers import Labels

from napari_sam3_onnx._napari.propagate.writer import RunWriter, lead_index
from napari_sam3_onnx.engine.tracking.steps import SliceOutput

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
