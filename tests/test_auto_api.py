"""Automatic segmentation and evaluation through the API and the command line (toy graphs)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import tifffile

from conftest import blob_image, disc
from napari_sam3_onnx import api
from napari_sam3_onnx.api.automatic import auto_table_columns
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.automatic import AutoMaskSettings
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry
from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

GEOM = TestGeometry(grid=24)
SHAPE = (150, 230)
FAST = AutoMaskSettings(points_per_side=12)


def drifting(z):
    """Three blobs drifting through z (a 3-D object each)."""
    return ((30 + 2 * z, 40 + 3 * z, 10), (100 - z, 150 + 2 * z, 9), (40, 190 - 3 * z, 8))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return build_sloped_tracker(tmp_path_factory.mktemp("steep"), GEOM)


@pytest.fixture(scope="module")
def stack():
    return np.stack([blob_image(SHAPE, drifting(z), value=255) for z in range(5)])


def test_segment_all_links_each_drifting_blob_into_one_id(folder, stack):
    bundle = api.open_bundle(folder)
    res = api.segment_all(bundle, stack, settings=FAST)
    assert res.done == 5 and res.labels.shape == stack.shape
    for k in range(3):
        ids = {int(res.labels[z][drifting(z)[k][:2]]) for z in range(5)}
        assert len(ids) == 1 and 0 not in ids
    assert len(np.unique(res.labels)) == 4
    assert len(res.rows) == 15 and {r["label"] for r in res.rows} == {1, 2, 3}
    plain = api.segment_all(bundle, stack, settings=FAST, link_iou=None)
    assert len(np.unique(plain.labels)) == 16  # fresh ids on every plane


def test_the_generator_yields_planes_and_stops_on_cancel(folder, stack):
    bundle = api.open_bundle(folder)
    seen = []
    refs = api.refs_along_axis(stack, source="image")
    for step in api.iter_segment_all(bundle.workspace(), refs, settings=FAST,
                                     cancelled=lambda: len(seen) >= 2):
        seen.append(step)
    assert [s.index for s in seen] == [(0,), (1,)] and seen[-1].total == 5
    assert all(len(s.result.instances) == 3 for s in seen)


def test_steps_say_how_many_tiles_were_encoded_and_small_planes_are_not_tiled(folder, stack):
    from napari_sam3_onnx.api.automatic import iter_segment_refs, tiles_per_plane
    from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
    from napari_sam3_onnx.engine.tiling.tiles import TileSettings

    bundle = api.open_bundle(folder)
    refs = [SliceRef(stack, (z,), False, (0.0, 255.0), "s", 0) for z in range(2)]
    # SHAPE's long side (230 px) is below the default threshold (2 x 336 px): never tiled;
    # a 150-px tile above 200 px cuts it in two
    for tiling, tiles in ((None, 1), (TileSettings(), 1), (TileSettings(150, threshold=200), 2)):
        enc = SliceEncoder(bundle.adapter)
        steps = list(iter_segment_refs(bundle.adapter, enc.embed, refs, FAST, tiling=tiling))
        assert [s.tiles for s in steps] == [tiles, tiles]
        assert tiles_per_plane(bundle.adapter, SHAPE, tiling) == tiles
        assert enc.encoder_calls == 2 * tiles  # the count said is the count encoded


def test_a_cancelled_run_resumes_from_the_store_without_encoding_again(folder, stack, tmp_path,
                                                                        monkeypatch):
    bundle = api.open_bundle(folder)
    calls = []
    real = bundle.adapter.encode
    monkeypatch.setattr(bundle.adapter, "encode", lambda rgb: calls.append(1) or real(rgb))
    store = tmp_path / "emb.zarr"
    done = []
    api.segment_all(bundle, stack, settings=FAST, store=store,
                    progress=lambda d, t: done.append(d), cancelled=lambda: len(done) >= 3)
    assert len(calls) == 3
    again = api.segment_all(bundle, stack, settings=FAST, store=store)
    assert len(calls) == 5 and again.done == 5  # only the two planes not reached before


def test_text_search_over_a_stack_can_link_instances(tmp_path):
    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    bundle = api.open_bundle(folder)
    image = planted_image()
    stack = np.stack([image, image, np.roll(image, 1, axis=1)])
    plain = api.search_text(bundle, stack, "bright", rgb=True)
    linked = api.search_text(bundle, stack, "bright", rgb=True, link_iou=0.3)
    per_plane = len(plain.rows) // 3
    assert len(np.unique(plain.labels)) - 1 == 3 * per_plane
    assert len(np.unique(linked.labels)) - 1 == per_plane
    assert {r["label"] for r in linked.rows} == set(range(1, per_plane + 1))


def test_evaluate_api_on_files_and_arrays(tmp_path):
    gt = np.zeros((40, 60), np.int32)
    gt[disc((40, 60), 10, 10, 6)] = 1
    gt[disc((40, 60), 25, 40, 8)] = 2
    pred = np.where(gt == 1, 3, 0).astype(np.int32)  # one found, one missed
    tifffile.imwrite(tmp_path / "p.tif", pred)
    tifffile.imwrite(tmp_path / "g.tif", gt)
    rep = api.evaluate(tmp_path / "p.tif", tmp_path / "g.tif")
    assert rep.images[0].name == "p"
    row = rep.rows()[0]
    assert (row["tp50"], row["fp50"], row["fn50"]) == (1, 0, 1) and row["msa"] == 0.5
    both = api.evaluate([pred, gt], [gt, gt])
    assert [r["image"] for r in both.rows()] == ["image0", "image1", "overall"]
    with pytest.raises(api.InputError, match="shape"):
        api.evaluate(pred, gt[:, :50])
    with pytest.raises(api.InputError, match="integer"):
        api.evaluate(pred.astype(float), gt)


def _run(*argv, capsys):
    code = main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def test_cli_segment_all_then_evaluate_against_the_truth(folder, stack, tmp_path, capsys):
    tifffile.imwrite(tmp_path / "stack.tif", stack, photometric="minisblack")
    truth = np.zeros(stack.shape, np.int32)
    for z in range(5):
        for k, (r, c, rad) in enumerate(drifting(z)):
            truth[z][disc(SHAPE, r, c, rad)] = k + 1
    tifffile.imwrite(tmp_path / "truth.tif", truth)
    code, out, err = _run("segment-all", folder, tmp_path / "stack.tif", "--out",
                          tmp_path / "auto.tif", "--table", tmp_path / "auto.csv",
                          "--points-per-side", 12, capsys=capsys)
    assert code == 0, err
    assert "3 object(s) on 5 slice(s)" in out
    labels = tifffile.imread(tmp_path / "auto.tif")
    assert labels.shape == stack.shape and labels.dtype == np.int32
    with open(tmp_path / "auto.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert reader.fieldnames == auto_table_columns(1) and len(rows) == 15
    code, out, err = _run("evaluate", tmp_path / "auto.tif", tmp_path / "truth.tif", "--csv",
                          tmp_path / "score.csv", capsys=capsys)
    assert code == 0, err
    assert "mSA" in out and "auto" in out
    with open(tmp_path / "score.csv", newline="") as fh:
        row = next(csv.DictReader(fh))
    assert (row["n_pred"], row["n_true"], row["tp50"]) == ("3", "3", "3")  # 3-D objects
    code, _, err = _run("segment-all", folder, tmp_path / "stack.tif", "--out",
                        tmp_path / "x.tif", "--pred-iou-thresh", "2", "--box-nms-thresh", "0",
                        capsys=capsys)
    assert code == 2 and "box_nms_thresh" in err
    code, _, err = _run("evaluate", tmp_path / "auto.tif", tmp_path, capsys=capsys)
    assert code == 2


def test_segment_all_and_evaluate_never_replace_a_file_without_overwrite(folder, stack, tmp_path,
                                                                         capsys):
    tifffile.imwrite(tmp_path / "stack.tif", stack, photometric="minisblack")
    precious = tmp_path / "painted.tif"
    tifffile.imwrite(precious, np.arange(12, dtype=np.int32).reshape(3, 4))
    before = precious.read_bytes()
    code, _, err = _run("segment-all", folder, tmp_path / "stack.tif", "--out", precious,
                        "--points-per-side", 4, capsys=capsys)
    assert code == 2 and "--overwrite" in err and "Traceback" not in err
    code, _, err = _run("segment-all", folder, tmp_path / "stack.tif", "--out",
                        tmp_path / "stack.tif", "--overwrite", "--points-per-side", 4,
                        capsys=capsys)
    assert code == 2 and "input image" in err
    code, _, err = _run("evaluate", precious, precious, "--csv", precious, "--overwrite",
                        capsys=capsys)
    assert code == 2
    assert precious.read_bytes() == before
    assert tifffile.imread(tmp_path / "stack.tif").shape == stack.shape
