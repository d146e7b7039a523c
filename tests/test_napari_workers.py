"""Worker helpers of the widget (no viewer needed)."""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx._napari.workers import neighbours
from napari_sam3_onnx.engine.encoding import SliceRef


def test_neighbours_along_the_last_leading_axis():
    data = np.zeros((2, 4, 6, 7))
    refs = neighbours(SliceRef(data, (1, 3)), data.shape)
    assert [r.index for r in refs] == [(1, 2)]
    refs = neighbours(SliceRef(data, (0, 1)), data.shape)
    assert sorted(r.index for r in refs) == [(0, 0), (0, 2)]
    assert neighbours(SliceRef(np.zeros((6, 7)), ()), (6, 7)) == []
