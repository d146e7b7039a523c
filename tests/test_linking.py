"""3-D linking of per-plane labels: one id per drifting object through z."""

import numpy as np
import pytest

from conftest import disc
from napari_sam3_onnx.engine.automatic.linking import PlaneLinker, relabel

SHAPE = (80, 120)


def _plane(objects, order):
    """Labels with the discs ``objects`` painted with per-plane ids in ``order``."""
    out = np.zeros(SHAPE, np.int32)
    for pid, k in enumerate(order, start=1):
        r, c, rad = objects[k]
        out[disc(SHAPE, r, c, rad)] = pid
    return out


def test_drifting_blobs_keep_one_id_each():
    linker = PlaneLinker()
    tracks = {0: [], 1: []}
    rng = np.random.default_rng(3)
    for z in range(8):  # two blobs drift by 2-3 px per plane; their per-plane ids shuffle
        blobs = [(20 + 2 * z, 25 + 3 * z, 9 + (z % 3)), (60 - z, 95 - 2 * z, 8)]
        order = list(rng.permutation(2))
        plane = _plane(blobs, order)
        linked = relabel(plane, linker.link(plane, (z,)))
        for k, (r, c, _) in enumerate(blobs):
            tracks[k].append(int(linked[r, c]))
    assert len(set(tracks[0])) == 1 and len(set(tracks[1])) == 1
    assert tracks[0][0] != tracks[1][0]


def test_a_new_object_and_a_gap_get_new_ids():
    linker = PlaneLinker()
    a = _plane([(20, 20, 8)], [0])
    both = _plane([(21, 21, 8), (60, 90, 7)], [0, 1])
    assert linker.link(a, (0,)) == {1: 1}
    assert linker.link(both, (1,)) == {1: 1, 2: 2}
    assert linker.link(both, (3,)) == {1: 3, 2: 4}  # plane 2 skipped: not consecutive


def test_far_jump_is_not_linked_and_threshold_is_checked():
    linker = PlaneLinker(link_iou=0.3)
    linker.link(_plane([(20, 20, 8)], [0]), (0,))
    assert linker.link(_plane([(20, 36, 8)], [0]), (1,)) == {1: 2}
    with pytest.raises(ValueError):
        PlaneLinker(link_iou=1.0)


def test_planes_of_another_time_point_are_not_linked():
    linker = PlaneLinker()
    p = _plane([(20, 20, 8)], [0])
    linker.link(p, (0, 4))
    assert linker.link(p, (1, 5)) == {1: 2}  # z follows, but t changed
    assert linker.link(p, (1, 6)) == {1: 2}
