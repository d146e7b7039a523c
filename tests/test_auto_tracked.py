"""3-D ids by propagation: automatic objects of a key plane carried through z with memory."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.api.automatic_tracked import iter_segment_tracked, segment_all_tracked
from napari_sam3_onnx.engine.automatic import AutoMaskSettings
from napari_sam3_onnx.engine.cache import EmbeddingCache
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.testing.nso import build_nso

SHAPE = (150, 230)
FAST = AutoMaskSettings(points_per_side=12)


def drifting(z):
    """Blobs drifting through z (a 3-D object each)."""
    return ((30 + 2 * z, 40 + 3 * z, 10), (100 - z, 150 + 2 * z, 9), (40, 190 - 3 * z, 8))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return api.open_bundle(build_nso(tmp_path_factory.mktemp("nso")))


def test_objects_of_the_key_plane_keep_one_id_through_the_stack(bundle, tmp_path):
    stack = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(5)])
    store = tmp_path / "emb.zarr"
    res = segment_all_tracked(bundle, stack, key=3, settings=FAST, store=store)
    assert res.key == 3 and res.labels.shape == stack.shape
    assert res.propagation is not None and res.propagation.method == "memory"
    key_ids = {int(res.labels[3][drifting(3)[k][:2]]) for k in range(3)} - {0}
    assert len(key_ids) >= 2  # the toy generator finds most blobs on the key plane
    assert {r["label"] for r in res.rows} == key_ids
    for k in range(3):
        ids = {int(res.labels[z][drifting(z)[k][:2]]) for z in range(5)}
        oid = int(res.labels[3][drifting(3)[k][:2]])
        assert ids == {oid}  # found on the key plane: the same id on every plane; else never
    assert set(np.unique(res.labels)) == key_ids | {0}
    assert len(api.verify_store(store).entries) == 5
    assert res.propagation.encoder_calls == 4  # the key plane came from the store


def test_a_2d_image_or_a_key_outside_the_stack_is_refused(bundle):
    with pytest.raises(PromptError, match="stack"):
        segment_all_tracked(bundle, blob_image(SHAPE, drifting(0)), settings=FAST)
    stack = np.stack([blob_image(SHAPE, drifting(z)) for z in range(3)])
    with pytest.raises(PromptError, match="outside"):
        segment_all_tracked(bundle, stack, key=3, settings=FAST)


def test_cli_propagate_from_writes_what_the_api_gives(bundle, tmp_path, capsys):
    import csv

    import tifffile

    from napari_sam3_onnx.cli import main

    stack = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(5)])
    tifffile.imwrite(tmp_path / "stack.tif", stack, photometric="minisblack")
    code = main(["segment-all", str(bundle.folder), str(tmp_path / "stack.tif"), "--out",
                 str(tmp_path / "tracked.tif"), "--table", str(tmp_path / "tracked.csv"),
                 "--points-per-side", "12", "--propagate-from", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "carried through 5 slice(s) (memory)" in out
    got = tifffile.imread(tmp_path / "tracked.tif")
    ref = segment_all_tracked(bundle, stack, key=3, settings=FAST)
    np.testing.assert_array_equal(got, ref.labels)
    with open(tmp_path / "tracked.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    want = sorted((z, int(i)) for z in range(5) for i in np.unique(ref.labels[z]) if i)
    assert sorted((int(r["index_0"]), int(r["label"])) for r in rows) == want
    code = main(["segment-all", str(bundle.folder), str(tmp_path / "stack.tif"), "--out",
                 str(tmp_path / "x.tif"), "--propagate-from", "1", "--slices", "0:2"])
    assert code == 2 and not (tmp_path / "x.tif").exists()


# ---- the generator every caller shares -----------------------------------------------------

def _tracked_refs(bundle, stack):
    from napari_sam3_onnx.api.jobs import StackJob

    workspace = bundle.workspace(cache=EmbeddingCache())
    return workspace, StackJob(stack).refs()


def test_the_generator_yields_the_key_plane_first_then_every_plane_once(bundle):
    stack = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(6)])
    workspace, refs = _tracked_refs(bundle, stack)
    gen = iter_segment_tracked(workspace, refs, 2, settings=FAST, stop_after_absent=None)
    steps, run = _drain(gen)
    assert steps[0].index == (2,)
    assert sorted(s.index for s in steps) == [(z,) for z in range(6)]  # each plane once
    assert [s.done for s in steps] == list(range(1, 7)) and {s.total for s in steps} == {6}
    got = np.stack([s.result.labels for s in sorted(steps, key=lambda s: s.index)])
    ref = segment_all_tracked(bundle, stack, key=2, settings=FAST, stop_after_absent=None)
    np.testing.assert_array_equal(got, ref.labels)  # the API is a loop over the generator
    assert run.key == 2 and run.method == "memory" and not run.cancelled
    assert run.rows == ref.rows and {r["label"] for r in run.rows} == set(np.unique(got)) - {0}
    # each plane's objects: the key plane's score, this plane's own area and box
    key_score = {r["label"]: r["score"] for r in run.rows}
    for s in steps:
        for inst in s.result.instances:
            mask = s.result.labels == inst.id
            rows, cols = np.nonzero(mask)
            assert inst.area == mask.sum() and inst.index == s.index
            assert inst.box_rc == (rows.min(), cols.min(), rows.max(), cols.max())
            assert round(inst.score, 6) == key_score[inst.id]
        assert {i.id for i in s.result.instances} == set(np.unique(s.result.labels)) - {0}
    # one workspace for both steps: the key plane is encoded once even without a store
    assert run.propagation.encoder_calls == 5


def test_the_generator_stops_on_cancel_with_complete_planes(bundle):
    stack = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(6)])
    workspace, refs = _tracked_refs(bundle, stack)
    seen = []
    gen = iter_segment_tracked(workspace, refs, 2, settings=FAST,
                               cancelled=lambda: len(seen) >= 3)
    while True:
        try:
            seen.append(next(gen))
        except StopIteration as stop:
            run = stop.value
            break
    assert len(seen) == 3 and run.cancelled and run.propagation.cancelled
    gen = iter_segment_tracked(workspace, refs, 2, settings=FAST, cancelled=lambda: True)
    steps, run = _drain(gen)  # cancelled on the key plane: nothing, nothing propagated
    assert steps == [] and run.cancelled and run.propagation is None


def test_the_generator_refuses_bad_input_before_any_work(bundle):
    stack = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(3)])
    workspace, refs = _tracked_refs(bundle, stack)
    calls0 = workspace.encoder.thread_encoder_calls()
    for key, kwargs, match in ((3, {}, "outside"), (-1, {}, "outside"),
                               (1, {"stop_after_absent": 0}, "stop_after_absent")):
        with pytest.raises(PromptError, match=match):
            next(iter_segment_tracked(workspace, refs, key, settings=FAST, **kwargs))
    with pytest.raises(PromptError, match="stack"):
        next(iter_segment_tracked(workspace, refs[:1], 0, settings=FAST))
    assert workspace.encoder.thread_encoder_calls() == calls0  # nothing was encoded


def _drain(gen):
    steps = []
    while True:
        try:
            steps.append(next(gen))
        except StopIteration as stop:
            return steps, stop.value


def test_a_model_attached_mid_run_does_not_change_the_run(bundle, tmp_path):
    from napari_sam3_onnx.models.bundle import open_adapter
    from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

    stack = np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(4)])
    workspace, refs = _tracked_refs(bundle, stack)
    other = build_hf_tracker(tmp_path / "hf")  # no memory graphs: it would carry over

    def attach_once():  # the dock loads another model while the key plane is segmented
        if workspace.adapter is bundle.adapter:
            workspace.attach(open_adapter(other), other)
        return False

    steps, run = _drain(iter_segment_tracked(workspace, refs, 1, settings=FAST,
                                             cancelled=attach_once))
    assert workspace.adapter is not bundle.adapter  # the other model was attached mid-run
    assert run.method == "memory" and len(steps) == 4
    ref = segment_all_tracked(bundle, stack, key=1, settings=FAST)
    for step in steps:
        np.testing.assert_array_equal(step.result.labels, ref.labels[step.index])


def test_the_key_plane_step_reports_the_tiles_it_was_segmented_in(tmp_path):
    """A tiled key plane says so on its own step (the dock shows "on N tiles"); the planes
    reached by propagation are decoded whole."""
    from napari_sam3_onnx.api.automatic import tiles_per_plane
    from napari_sam3_onnx.engine.tiling.tiles import TileSettings
    from napari_sam3_onnx.testing.automatic import build_sloped_tracker
    from napari_sam3_onnx.testing.geometry import TestGeometry

    small = api.open_bundle(build_sloped_tracker(tmp_path / "tracker", TestGeometry(grid=6)))
    shape = (190, 130)  # above twice the 84-px input: six tiles
    blobs = ((22, 25, 3), (95, 60, 3), (150, 20, 3), (120, 110, 5))
    data = np.stack([blob_image(shape, [(r + 3 * z, c + 2 * z, rad) for r, c, rad in blobs],
                                value=255) for z in range(3)])
    workspace = small.workspace(None, EmbeddingCache(), TileSettings())
    assert tiles_per_plane(workspace.adapter, shape, workspace.tiling) == 6
    from napari_sam3_onnx.api.jobs import StackJob

    job = StackJob(data, "image", 0, window=(0.0, 255.0))
    steps = list(iter_segment_tracked(workspace, job.refs(job.view()), 1,
                                      settings=AutoMaskSettings(points_per_side=8)))
    assert {s.index: s.tiles for s in steps} == {(1,): 6, (0,): 1, (2,): 1}
