"""Propagation through z on the memory test graphs (pagarcia, jax-video) and by carry-over."""

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tracking.propagation import Seed, propagate
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.pagarcia import build_pagarcia

Z, SHAPE = 12, (60, 90)
#: id -> (row at z=0, col at z=0, rows per slice, cols per slice, radius, slices present)
BLOB_A = (10.0, 14.0, 1.0, 3.2, 6, range(0, Z))
BLOB_B = (50.0, 80.0, -0.5, -3.0, 5, range(0, Z))


@pytest.fixture(scope="module")
def folders(tmp_path_factory, hf_bundle):
    root = tmp_path_factory.mktemp("propagation")
    return {"pagarcia": build_pagarcia(root / "pagarcia"), "jax": build_jax_video(root / "jax"),
            "hf": hf_bundle}


@pytest.fixture(scope="module")
def bundles(folders):
    return {name: open_adapter(folder) for name, folder in folders.items()}


def api_bundle(bundles, folders, name):
    """The headless API's bundle around the same adapter (its sessions are shared)."""
    return api.Bundle(bundles[name], folders[name])


def centre(blob, z):
    return blob[0] + blob[2] * z, blob[1] + blob[3] * z


def truth(blob, z):
    rr, cc = np.mgrid[: SHAPE[0], : SHAPE[1]]
    r, c = centre(blob, z)
    on = z in blob[5]
    return on & ((rr - r) ** 2 + (cc - c) ** 2 <= blob[4] ** 2)


def scene(*blobs, z=Z):
    stack = np.zeros((z, *SHAPE), np.uint8)
    for k in range(z):
        for b in blobs:
            stack[k][truth(b, k)] = 200
    return stack


def seed_on(blob, z):
    return Seed.clicks(z, [centre(blob, z)])


def run(adapter, stack, seeds, **kw):
    encoder = SliceEncoder(adapter)
    refs = [SliceRef(stack, (k,), source="stack") for k in range(len(stack))]
    return propagate(adapter, encoder, refs, seeds, **kw), encoder


def iou(a, b):
    return (a & b).sum() / max((a | b).sum(), 1)


@pytest.mark.parametrize("name", ["pagarcia", "jax", "hf"])
def test_follows_a_drifting_blob_both_ways(bundles, name):
    adapter = bundles[name]
    res, encoder = run(adapter, scene(BLOB_A), {1: seed_on(BLOB_A, 5)})
    assert res.method == ("memory" if adapter.has(Capability.MEMORY) else "carry-over")
    track = res.objects[1]
    assert track.slices == list(range(Z))
    for z in range(Z):
        assert iou(track.mask(z), truth(BLOB_A, z)) > 0.7, z
        assert track.mask(z).shape == SHAPE
    assert {d: s.reason for d, s in track.stops.items()} == {"forward": "range-end",
                                                             "backward": "range-end"}
    assert (track.stops["forward"].index, track.stops["backward"].index) == (Z - 1, 0)
    assert res.encoder_calls == encoder.encoder_calls == Z  # one encode per slice visited
    assert [t for t, s in res.visited] == [*range(6, Z), *range(4, -1, -1)]
    for bank in res.banks.values():
        assert bank.peak_memories <= bank.bound(2)[0]


@pytest.mark.parametrize("name", ["pagarcia", "jax", "hf"])
def test_vanishing_object_stops_where_it_vanishes(bundles, name):
    blob = (*BLOB_A[:5], range(0, 9))
    res, _ = run(bundles[name], scene(blob), {1: seed_on(blob, 3)})
    track = res.objects[1]
    stop = track.stops["forward"]
    assert (stop.index, stop.reason, stop.last_present) == (10, "absent", 8)
    assert not track.mask(9).any() and not track.mask(10).any()
    assert track.mask(11) is None  # never visited
    assert track.stops["backward"].reason == "range-end"
    res, _ = run(bundles[name], scene(blob), {1: seed_on(blob, 3)}, stop_after_absent=None,
                 direction="forward")
    assert res.objects[1].stops == {"forward": res.objects[1].stops["forward"]}
    assert res.objects[1].stops["forward"].reason == "range-end"


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_two_objects_keep_their_ids(bundles, name):
    res, encoder = run(bundles[name], scene(BLOB_A, BLOB_B),
                       {7: seed_on(BLOB_A, 4), 3: seed_on(BLOB_B, 8)})
    assert set(res.objects) == {3, 7}
    for z in range(Z):
        masks = res.masks(z)
        assert iou(masks[7], truth(BLOB_A, z)) > 0.7, z
        assert iou(masks[3], truth(BLOB_B, z)) > 0.7, z
        assert not (masks[7] & masks[3]).any()
    assert encoder.encoder_calls == Z  # shared by both objects


@pytest.mark.parametrize("name", ["pagarcia", "jax", "hf"])
def test_correction_recomputes_later_slices_only(bundles, name):
    adapter = bundles[name]
    stack = scene(BLOB_A, BLOB_B)
    encoder = SliceEncoder(adapter)
    refs = [SliceRef(stack, (k,), source="stack") for k in range(Z)]
    first = propagate(adapter, encoder, refs, {1: seed_on(BLOB_A, 2)})
    k = 7  # the user says: from slice 7 on, object 1 is the other blob
    fixed = propagate(adapter, encoder, refs, {1: [seed_on(BLOB_A, 2), seed_on(BLOB_B, k)]})
    assert fixed.encoder_calls == 0  # every slice came from the cache
    assert fixed.objects[1].conditioning == (2, k)
    for z in range(Z):
        before, after = first.objects[1].mask(z), fixed.objects[1].mask(z)
        if z < k:
            assert np.array_equal(before, after), z
        else:
            assert iou(after, truth(BLOB_B, z)) > 0.7, z
            assert iou(before, truth(BLOB_A, z)) > 0.7, z


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_cancel_mid_way_returns_a_consistent_partial_result(bundles, name):
    checks = []

    def cancelled():
        checks.append(1)
        return len(checks) > 5  # slice 5 (the seed) is checked too

    seen = []
    res, encoder = run(bundles[name], scene(BLOB_A, BLOB_B),
                       {1: seed_on(BLOB_A, 5), 2: seed_on(BLOB_B, 5)}, cancelled=cancelled,
                       progress=lambda done, total: seen.append((done, total)))
    assert res.cancelled
    assert [t for t, _ in res.visited] == [6, 7, 8, 9]  # the first four forward slices
    for oid in (1, 2):
        track = res.objects[oid]
        assert track.slices == [5, 6, 7, 8, 9]
        assert track.stops == {"forward": track.stops["forward"]}
        assert (track.stops["forward"].reason, track.stops["forward"].index) == ("cancelled", 9)
    assert res.encoder_calls == encoder.encoder_calls == 5
    assert seen[-1][0] < seen[-1][1]  # the bar did not claim completion


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_direction_and_range(bundles, name):
    stack = scene(BLOB_A)
    res, encoder = run(bundles[name], stack, {1: seed_on(BLOB_A, 6)}, direction="backward",
                       index_range=(3, 10))
    assert res.objects[1].slices == [3, 4, 5, 6]
    assert res.objects[1].stops["backward"] == res.objects[1].stops["backward"].__class__(
        3, "range-end", 3)
    assert encoder.encoder_calls == 4
    res, _ = run(bundles[name], stack, {1: seed_on(BLOB_A, 6)}, direction="forward",
                 index_range=(3, 10))
    assert res.objects[1].slices == [6, 7, 8, 9]
    with pytest.raises(PromptError, match="outside"):
        run(bundles[name], stack, {1: seed_on(BLOB_A, 2)}, index_range=(3, 10))


@pytest.mark.parametrize("name", ["pagarcia", "jax", "hf"])
def test_mask_seed(bundles, name):
    res, _ = run(bundles[name], scene(BLOB_A), {4: Seed.from_mask(8, truth(BLOB_A, 8))})
    track = res.objects[4]
    assert np.array_equal(track.mask(8), truth(BLOB_A, 8))  # the seed is the slice's output
    for z in range(Z):
        assert iou(track.mask(z), truth(BLOB_A, z)) > 0.7, z


def test_two_d_data_and_bad_seeds_are_refused(bundles, folders):
    adapter = bundles["pagarcia"]
    plane = scene(BLOB_A)[0]
    with pytest.raises(PromptError, match="2-D"):
        propagate(adapter, SliceEncoder(adapter), [SliceRef(plane, ())], {1: seed_on(BLOB_A, 0)})
    with pytest.raises(PromptError, match="2-D"):
        api.propagate(api_bundle(bundles, folders, "pagarcia"), plane, {1: seed_on(BLOB_A, 0)})
    with pytest.raises(PromptError, match="at least one object"):
        run(adapter, scene(BLOB_A), {})
    with pytest.raises(PromptError, match="shape"):
        run(adapter, scene(BLOB_A), {1: Seed.from_mask(3, np.ones((5, 5), bool))})


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_api_propagate_labels_along_a_chosen_axis(bundles, folders, name):
    stack = scene(BLOB_A, BLOB_B)
    tz = np.stack([np.zeros_like(stack), stack])  # (T=2, Z, rows, cols); objects at t = 1
    seeds = {5: seed_on(BLOB_A, 3), 9: seed_on(BLOB_B, 9)}
    bundle = api_bundle(bundles, folders, name)
    labels, res = api.propagate(bundle, tz, seeds, axis=1, fixed=(1,))
    assert labels.shape == (Z, *SHAPE) and labels.dtype == np.int32
    assert set(np.unique(labels)) == {0, 5, 9}
    for z in range(Z):
        assert iou(labels[z] == 5, truth(BLOB_A, z)) > 0.7
        assert iou(labels[z] == 9, truth(BLOB_B, z)) > 0.7
    assert all(not t.outputs for t in res.objects.values())  # the labels hold the result
    with pytest.raises(PromptError, match="Object id 0: ids are whole numbers from 1"):
        api.propagate(bundle, stack, {0: seed_on(BLOB_A, 3)})


def test_a_long_stack_holds_a_bounded_bank(bundles):
    n, blob = 48, (30.0, 10.0, 0.0, 1.5, 6, range(0, 48))
    spy = Spy(bundles["pagarcia"])
    res, _ = run(spy, scene(blob, z=n), {1: seed_on(blob, 20)})
    bank = res.banks[1]
    # the backward pass starts next to the forward pass's memories, kept while it ran to 47
    assert spy.attends[n - 21][0] == [6, 1]  # slice 19: seed 20 and slice 21 (row 1)
    assert res.objects[1].slices == list(range(n))
    mem_bound, ptr_bound = bank.bound(2)
    assert bank.peak_memories <= mem_bound < n // 2
    assert bank.peak_pointers <= ptr_bound < n
    assert bank.held_memories <= bank.settings.spatial_reach + 1


class Spy:
    """Records the calls an adapter's memory graphs receive (everything else passes through).

    It stands in for both the adapter and its memory-graphs role.
    """

    def __init__(self, inner):
        self.inner, self.encodes, self.attends = inner, [], []
        self.graphs = inner.memory_graphs

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def memory_graphs(self):
        return self

    @property
    def memory_settings(self):
        return self.graphs.memory_settings

    @property
    def memory_note(self):
        return self.graphs.memory_note

    def memory_encode(self, embedding, mask_logits, object_score, is_mask_from_points):
        self.encodes.append((np.asarray(mask_logits).copy(), object_score, is_mask_from_points))
        return self.graphs.memory_encode(embedding, mask_logits, object_score,
                                         is_mask_from_points)

    def memory_attend(self, embedding, memories, rows, pointers, offsets):
        self.attends.append((list(rows), list(offsets), len(pointers)))
        return self.graphs.memory_attend(embedding, memories, rows, pointers, offsets)


def test_memory_calls_follow_sam3(bundles):
    blob = (*BLOB_A[:5], range(0, 9))
    spy = Spy(bundles["jax"])  # dynamic memory sizes: nothing trimmed
    res, _ = run(spy, scene(blob), {1: seed_on(blob, 3)}, direction="forward")
    assert [t for t, _ in res.visited] == [4, 5, 6, 7, 8, 9, 10]
    flags = [e[2] for e in spy.encodes]
    assert flags == [True] + [False] * 7  # the seed binarised, tracked slices not
    for logits, score, _ in spy.encodes[-2:]:  # slices 9, 10: the object is gone
        assert score <= 0 and (logits == -1024.0).all()
    rows, offsets, n_ptr = spy.attends[3]  # slice 7: cond 3, then 4, 5, 6
    assert rows == [6, 2, 1, 0] and n_ptr == 4
    # pointer positions 4 (cond), 1, 2, 3 rescaled for the graph's fixed / 15: x 15 / (12 - 1)
    np.testing.assert_allclose(offsets, np.array([4, 1, 2, 3]) * 15 / 11, rtol=1e-6)


@pytest.mark.parametrize("name", ["pagarcia", "hf"])
def test_the_workflow_generator_yields_seeds_then_passes_and_the_api_is_its_thin_call(
        bundles, folders, name):
    """``api.propagate`` (the CLI's path) and the dock's generator give the same labels."""
    from napari_sam3_onnx.api.propagate import iter_propagate
    from napari_sam3_onnx.api.workspace import Workspace
    from napari_sam3_onnx.engine.tracking.labels import LabelWriter

    stack = scene(BLOB_A)
    seeds = {3: seed_on(BLOB_A, 5)}
    headless, _ = api.propagate(api_bundle(bundles, folders, name), stack, seeds)
    ws = Workspace()
    ws.attach(bundles[name], folders[name])
    refs = [SliceRef(stack, (k,), source="stack") for k in range(Z)]
    steps, labels = iter_propagate(ws, refs, seeds), np.zeros((Z, *SHAPE), np.int32)
    seen = []
    while True:
        try:
            step = next(steps)
        except StopIteration as stop:
            result = stop.value
            break
        seen.append(step)
        if step.outputs is not None:
            LabelWriter(labels)(step.index, step.outputs)
    assert seen[0].seed and seen[0].index == 5 and not any(s.seed for s in seen[1:])
    walked = [s.index for s in seen[1:]]
    assert walked == [5, *range(6, Z), 5, *range(4, -1, -1)]  # up from the seed, then down
    assert [s.done for s in seen[1:]] == list(range(1, len(walked) + 1))
    assert {s.total for s in seen} == {len(walked)}
    np.testing.assert_array_equal(labels, headless)
    assert iou(labels[9] == 3, truth(BLOB_A, 9)) > 0.8
    assert result.encoder_calls == Z and not result.cancelled


def test_the_workflow_generator_stops_on_its_cancel_token_and_checks_seeds_first(
        bundles, folders):
    from napari_sam3_onnx.api.propagate import iter_propagate
    from napari_sam3_onnx.api.workspace import Workspace

    ws = Workspace()
    ws.attach(bundles["pagarcia"], folders["pagarcia"])
    stack = scene(BLOB_A)
    refs = [SliceRef(stack, (k,), source="stack") for k in range(Z)]
    with pytest.raises(PromptError, match="Object id"):
        next(iter_propagate(ws, refs, {0: seed_on(BLOB_A, 5)}))
    with pytest.raises(PromptError, match="stop_after_absent"):
        next(iter_propagate(ws, refs, {1: seed_on(BLOB_A, 5)}, stop_after_absent=0))
    with pytest.raises(PromptError, match="a stack"):
        next(iter_propagate(ws, refs[:1], {1: seed_on(BLOB_A, 0)}))
    done = []
    steps = iter_propagate(ws, refs, {1: seed_on(BLOB_A, 5)}, cancelled=lambda: len(done) >= 4)
    with pytest.raises(StopIteration) as stop:
        while True:
            done.append(next(steps))
    assert len(done) == 4 and stop.value.value.cancelled
