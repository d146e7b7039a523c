"""Provenance of labels outputs and ``replay``, through the command line in a subprocess.

Every labels command records what made its output (bundle digests, workflow, prompts, settings)
inside the output or beside it (.npy); ``replay`` runs the record again and must give identical
labels with the same bundle and data, and say per object how much changed with another bundle.
The data are asymmetric (rows != cols) and differ slice to slice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile

from conftest import blob_image
from napari_sam3_onnx import __version__
from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.api.io import InputError, read_image
from napari_sam3_onnx.api.provenance import (
    ATTR,
    mask_to_rle,
    read_provenance,
    rle_to_mask,
    seeds_from_json,
    seeds_to_json,
    sidecar,
)
from napari_sam3_onnx.engine.store.bundle_digest import bundle_digest, file_hashes
from napari_sam3_onnx.engine.tracking.types import Seed
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

SRC = Path(__file__).resolve().parents[1] / "src"


def cli(*argv) -> tuple[int, str, str]:
    """Run the command line in a fresh interpreter: (exit code, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", "napari_sam3_onnx.cli", *map(str, argv), "-q"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def toy():
    return resolve_bundle("toy")


@pytest.fixture(scope="module")
def nuclei(tmp_path_factory):
    """A (5, 70, 110) uint16 stack of drifting nuclei and its truth (asymmetric planes)."""
    image, truth = synthetic_nuclei((5, 70, 110), n_nuclei=4, seed=1)
    path = tmp_path_factory.mktemp("nuclei") / "stack.tif"
    tifffile.imwrite(path, image, photometric="minisblack")
    return path, truth


def _drifting(z):
    return ((30 + 2 * z, 40 + 3 * z, 10), (100 - z, 150 + 2 * z, 9), (40, 190 - 3 * z, 8))


@pytest.fixture(scope="module")
def blobs(tmp_path_factory):
    """A (4, 150, 230) uint8 stack of three blobs drifting through z."""
    path = tmp_path_factory.mktemp("blobs") / "blobs.npy"
    np.save(path, np.stack([blob_image((150, 230), _drifting(z), value=255) for z in range(4)]))
    return path


def _labels(path: Path) -> np.ndarray:
    return np.asarray(read_image(path))


def test_text_records_its_making_in_the_tiff_and_replays_exactly(toy, nuclei, tmp_path):
    image, _ = nuclei
    out = tmp_path / "labels.tif"
    code, _, err = cli("text", toy, image, "--concepts", "nucleus", "--out", out,
                       "--window", 500, 4000, "--slices", "1:4", "--min-area", 5)
    assert code == 0, err
    labels = tifffile.imread(out)
    assert labels.shape == (5, 70, 110) and len(np.unique(labels[1:4])) > 3
    rec = read_provenance(out)
    assert rec.workflow == "text" and rec.plugin_version == __version__
    assert rec.bundle.digest == bundle_digest(toy) and rec.bundle.files == file_hashes(toy)
    assert rec.bundle.layout == "nso-sam3" and rec.bundle.precision == "fp32"
    assert rec.prompts == {"concepts": ["nucleus"]}
    assert rec.settings["window"] == [500.0, 4000.0] and rec.settings["min_area"] == 5
    assert rec.planes == [[1], [2], [3]]
    assert rec.image == {"path": str(image.resolve()), "shape": [5, 70, 110]}

    again = tmp_path / "again.tif"
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", again)
    assert code == 0, err
    assert "identical" in stdout
    np.testing.assert_array_equal(tifffile.imread(again), labels)


def test_text_into_ome_zarr_keeps_the_record_in_the_labels_attributes(toy, nuclei, tmp_path):
    image, _ = nuclei
    out = tmp_path / "labels.ome.zarr"
    code, _, err = cli("text", toy, image, "--concepts", "nucleus", "--out", out,
                       "--window", 500, 4000)
    assert code == 0, err
    attrs = json.loads((out / ".zattrs").read_text())
    assert attrs[ATTR]["workflow"] == "text" and "multiscales" in attrs
    assert read_provenance(out).settings["window"] == [500.0, 4000.0]


def test_propagate_npy_sidecar_holds_clicks_boxes_and_masks_and_replays(toy, nuclei, tmp_path):
    image, truth = nuclei
    r, c = np.argwhere(truth[2] == 1).mean(axis=0)
    ys, xs = np.nonzero(truth[3] == 2)
    seed_plane = np.where(truth[1] == 3, 3, 0).astype(np.int32)
    seed_file = tmp_path / "seed.tif"
    tifffile.imwrite(seed_file, seed_plane)
    out = tmp_path / "tracks.npy"
    code, _, err = cli("propagate", toy, image, "--click", 1, 2, r, c, "--box", 2, 3,
                       ys.min(), xs.min(), ys.max(), xs.max(), "--seed-labels", seed_file,
                       "--seed-slice", 1, "--window", 500, 4000, "--out", out)
    assert code == 0, err
    labels = np.load(out)
    assert set(np.unique(labels)) == {0, 1, 2, 3}
    rec = read_provenance(out)
    assert sidecar(out).is_file() and rec.workflow == "propagate"
    seeds = rec.prompts["seeds"]
    assert seeds["1"][0]["plane"] == 2 and seeds["1"][0]["labels"] == [1]
    assert seeds["2"][0]["box"] == [float(ys.min()), float(xs.min()), float(ys.max()),
                                    float(xs.max())]
    np.testing.assert_array_equal(rle_to_mask(seeds["3"][0]["mask"]), truth[1] == 3)
    seed_file.unlink()  # the mask seed lives in the record: the file is not needed again

    again = tmp_path / "again.ome.zarr"
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", again)
    assert code == 0, err
    assert "identical" in stdout
    np.testing.assert_array_equal(_labels(again), labels)


def test_segment_all_replays_exactly_and_reports_iou_with_another_bundle(toy, blobs,
                                                                         tmp_path):
    out = tmp_path / "auto.zarr"
    code, _, err = cli("segment-all", toy, blobs, "--out", out, "--points-per-side", 12)
    assert code == 0, err
    labels = _labels(out)
    assert labels.shape == (4, 150, 230) and labels.max() >= 3
    rec = read_provenance(out)
    assert rec.workflow == "segment-all" and rec.prompts == {}
    assert rec.settings["points_per_side"] == 12 and rec.settings["pred_iou_thresh"] > 0

    again = tmp_path / "again.tif"
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", again)
    assert code == 0, err
    assert "identical" in stdout
    np.testing.assert_array_equal(tifffile.imread(again), labels)

    other = build_sloped_tracker(tmp_path / "steep", TestGeometry(grid=24))
    moved = tmp_path / "moved.npy"
    code, stdout, err = cli("replay", out, "--bundle", other, "--out", moved)
    assert code == 0, err
    new = np.load(moved)
    assert not np.array_equal(new, labels)
    report = next(line for line in stdout.splitlines() if line.startswith("replay:"))
    ids = [int(i) for i in np.unique(labels) if i]
    assert f"{len(ids)} recorded object(s)" in report
    for oid in ids:  # each recorded object's best IoU with a new one, as computed here
        mine = labels == oid
        best = max(((mine & (new == j)).sum() / (mine | (new == j)).sum()
                    for j in np.unique(new[mine]) if j), default=0.0)
        assert f"{oid}: {best:.3f}" in report
    assert read_provenance(moved).bundle.digest == bundle_digest(other)


def test_each_file_of_a_folder_run_and_a_tracked_run_replay_exactly(toy, blobs, tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    stack = np.load(blobs)
    np.save(folder / "a.npy", stack)
    np.save(folder / "b.npy", stack[:, ::-1].copy())  # another image: the blobs flipped
    code, _, err = cli("segment-all", toy, folder, "--out", tmp_path / "out",
                       "--points-per-side", 12)
    assert code == 0, err
    rec = read_provenance(tmp_path / "out" / "b.tif")
    assert rec.image["path"] == str((folder / "b.npy").resolve())
    code, stdout, err = cli("replay", tmp_path / "out" / "b.tif", "--bundle", toy, "--out",
                            tmp_path / "b_again.tif")
    assert code == 0 and "identical" in stdout, err
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "b_again.tif"),
                                  tifffile.imread(tmp_path / "out" / "b.tif"))

    tracked = tmp_path / "tracked.tif"
    code, _, err = cli("segment-all", toy, blobs, "--propagate-from", 1, "--out", tracked,
                       "--points-per-side", 12)
    assert code == 0, err
    assert read_provenance(tracked).settings["propagate_from"] == 1
    code, stdout, err = cli("replay", tracked, "--bundle", toy, "--out", tmp_path / "t.npy")
    assert code == 0 and "identical" in stdout, err
    labels = tifffile.imread(tracked)
    assert labels.max() >= 1
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), labels)


def test_replay_says_when_the_same_bundle_does_not_reproduce_the_labels(toy, blobs, tmp_path):
    out = tmp_path / "auto.npy"
    code, _, err = cli("segment-all", toy, blobs, "--out", out, "--points-per-side", 12)
    assert code == 0, err
    edited = np.load(out)
    edited[0, 5:9, 7:20] = edited.max() + 1  # an object painted in by hand afterwards
    np.save(out, edited)
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", tmp_path / "again.npy")
    assert code == 1
    assert "did not reproduce" in err + stdout and f"{edited.max()}: 0.000" in stdout


def test_replay_keeps_the_output_rules_and_takes_another_image_path(toy, blobs, tmp_path):
    out = tmp_path / "auto.tif"
    code, _, err = cli("segment-all", toy, blobs, "--out", out, "--points-per-side", 12)
    assert code == 0, err
    before = out.read_bytes()
    taken = tmp_path / "taken.tif"
    taken.write_bytes(b"precious")
    for target, extra in ((taken, ()), (out, ("--overwrite",)), (blobs, ("--overwrite",)),
                          (toy / "labels.tif", ())):
        code, _, err = cli("replay", out, "--bundle", toy, "--out", target, *extra)
        assert code == 2 and err.startswith("error:"), (target, err)
    assert taken.read_bytes() == b"precious" and out.read_bytes() == before
    assert not (toy / "labels.tif").exists()

    foreign = tmp_path / "foreign.tif"  # labels another program wrote
    tifffile.imwrite(foreign, np.zeros((4, 150, 230), np.int32))
    code, _, err = cli("replay", foreign, "--bundle", toy, "--out", tmp_path / "x.tif")
    assert code == 2 and "records no provenance" in err

    moved = tmp_path / "elsewhere.npy"
    moved.write_bytes(blobs.read_bytes())
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", taken, "--overwrite",
                            "--image", moved)
    assert code == 0, err
    assert "identical" in stdout
    assert read_provenance(taken).image["path"] == str(moved.resolve())
    moved.unlink()
    code, _, err = cli("replay", taken, "--bundle", toy, "--out", tmp_path / "y.tif")
    assert code == 2 and "give the image with --image" in err


def test_an_npy_output_refuses_to_replace_a_sidecar_it_was_not_told_to(toy, blobs, tmp_path):
    stale = sidecar(tmp_path / "auto.npy")
    stale.write_text("{}")
    code, _, err = cli("segment-all", toy, blobs, "--out", tmp_path / "auto.npy",
                       "--points-per-side", 12)
    assert code == 2 and "provenance" in err and "--overwrite" in err
    assert stale.read_text() == "{}" and not (tmp_path / "auto.npy").exists()


def test_replay_has_help(capsys):
    from napari_sam3_onnx.cli import main

    assert main(["replay", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--bundle" in out and "--image" in out and "IoU" in out


def test_mask_runs_and_seeds_round_trip():
    rng = np.random.default_rng(3)
    for mask in (rng.random((7, 13)) > 0.5, np.ones((3, 5), bool), np.zeros((4, 9), bool)):
        np.testing.assert_array_equal(rle_to_mask(mask_to_rle(mask)), mask)
    seeds = {4: [Seed.clicks(2, [(1.5, 7.25), (3, 4)], [1, 0], (0, 1, 5, 9)),
                 Seed.from_mask(0, rng.random((6, 11)) > 0.3)]}
    back = seeds_from_json(json.loads(json.dumps(seeds_to_json(seeds))))
    click, mask = back[4]
    assert click.index == 2 and click.prompt is not None
    np.testing.assert_array_equal(click.prompt.points_rc, [[1.5, 7.25], [3, 4]])
    np.testing.assert_array_equal(click.prompt.labels, [1, 0])
    np.testing.assert_array_equal(click.prompt.box_rc, [0, 1, 5, 9])
    np.testing.assert_array_equal(mask.mask, seeds[4][1].mask)
    with pytest.raises(InputError):
        rle_to_mask({"shape": [2, 3], "counts": [1, 2]})


def test_a_one_plane_stack_keeps_its_record_and_replays(toy, blobs, tmp_path):
    """1 x Y x X labels are written without OME (readers drop the axis): the record stays."""
    one = tmp_path / "one.npy"
    np.save(one, np.load(blobs)[1:2])
    out = tmp_path / "one.tif"
    code, _, err = cli("segment-all", toy, one, "--out", out)
    assert code == 0, err
    assert tifffile.imread(out).shape == (1, 150, 230)
    assert read_provenance(out).workflow == "segment-all"
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", tmp_path / "again.tif")
    assert code == 0 and "identical" in stdout, err


def test_exemplars_from_labels_record_their_labels_and_replay_exactly(toy, nuclei, tmp_path):
    image, truth = nuclei
    exemplars = tmp_path / "exemplars.tif"
    lab = np.zeros_like(truth, dtype=np.int32)
    first = int(np.unique(truth[2])[1])
    lab[2][truth[2] == first] = 7
    tifffile.imwrite(exemplars, lab, photometric="minisblack")
    out = tmp_path / "like.tif"
    code, _, err = cli("text", toy, image, "--exemplars-from", exemplars, "--through-stack",
                       "--window", 500, 4000, "--out", out)
    assert code == 0, err
    rec = read_provenance(out)
    assert rec.prompts["exemplars_from"] == str(exemplars.resolve())
    assert rec.settings["through_stack"] is True
    again = tmp_path / "again.tif"
    code, stdout, err = cli("replay", out, "--bundle", toy, "--out", again)
    assert code == 0 and "identical" in stdout, err
    np.testing.assert_array_equal(tifffile.imread(again), tifffile.imread(out))
