"""segment-all over many files: one labels file per image, serially or one dask task per file."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import tifffile

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

pytest.importorskip("distributed")

#: Three non-square images of different shapes: a 2-D plane, a 3-slice stack, a tall plane.
IMAGES = {
    "wide": blob_image((70, 130), ((20, 30, 8), (45, 95, 9)), value=255),
    "stack": np.stack([blob_image((90, 60), ((25 + 2 * z, 20, 7), (60, 40 - z, 8)), value=255)
                       for z in range(3)]),
    "tall": blob_image((120, 50), ((30, 25, 8), (90, 20, 7), (60, 35, 5)), value=255),
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_sloped_tracker(tmp_path_factory.mktemp("steep"), TestGeometry(grid=24))


@pytest.fixture()
def files(tmp_path):
    paths = []
    for name, img in IMAGES.items():
        path = tmp_path / "in" / f"{name}.tif"
        path.parent.mkdir(exist_ok=True)
        tifffile.imwrite(path, img, photometric="minisblack")
        paths.append(path)
    return paths


def _run(*argv, capsys):
    code = main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _singles(bundle, files, tmp_path, capsys):
    """Each file through the one-file command: the reference."""
    out = {}
    for path in files:
        target = tmp_path / f"single-{path.stem}.tif"
        table = tmp_path / f"single-{path.stem}.csv"
        code, _, err = _run("segment-all", bundle, path, "--out", target, "--table", table,
                            "--points-per-side", 8, capsys=capsys)
        assert code == 0, err
        out[path.stem] = (tifffile.imread(target), _rows(table))
    return out


@pytest.mark.parametrize("where", [(), ("--workers", 2, "--no-processes", "--store", "emb.zarr")],
                         ids=["serial", "dask-threads-store"])
def test_many_files_give_what_each_file_gives_alone(bundle, files, tmp_path, capsys, where):
    ref = _singles(bundle, files, tmp_path, capsys)
    where = [tmp_path / w if str(w).endswith(".zarr") else w for w in where]
    code, out, err = _run("segment-all", bundle, *files, "--out", tmp_path / "labels",
                          "--table", tmp_path / "all.csv", "--points-per-side", 8, *where,
                          capsys=capsys)
    assert code == 0, err
    if where:  # the workers wrote every plane's embedding into the store, each once
        report = api.verify_store(tmp_path / "emb.zarr")
        assert len(report.entries) == 5 and report.count("ok") == 5
    assert "3 image(s)" in out
    rows = _rows(tmp_path / "all.csv")
    for name, (labels, table) in ref.items():
        got = tifffile.imread(tmp_path / "labels" / f"{name}.tif")
        assert got.shape == IMAGES[name].shape and got.dtype == np.int32
        np.testing.assert_array_equal(got, labels)
        assert len(np.unique(labels)) > 2  # the reference found objects: the check can fail
        mine = [{k: v for k, v in r.items() if k != "image" and v != ""} for r in rows
                if r["image"] == name]
        assert mine == table
    assert [r["image"] for r in rows] == sorted((r["image"] for r in rows),
                                                key=list(IMAGES).index)


def test_many_files_refuse_a_file_as_out_and_keep_existing_outputs(bundle, files, tmp_path,
                                                                   capsys):
    precious = tmp_path / "precious.tif"
    precious.write_bytes(b"keep me")
    code, _, err = _run("segment-all", bundle, *files, "--out", precious, capsys=capsys)
    assert code == 2 and "folder" in err and "Traceback" not in err
    assert precious.read_bytes() == b"keep me"
    outdir = tmp_path / "labels"
    outdir.mkdir()
    (outdir / "tall.tif").write_bytes(b"mine")
    code, _, err = _run("segment-all", bundle, *files, "--out", outdir, "--points-per-side", 4,
                        capsys=capsys)
    assert code == 2 and "--overwrite" in err
    assert (outdir / "tall.tif").read_bytes() == b"mine"
    assert sorted(p.name for p in outdir.iterdir()) == ["tall.tif"]  # nothing written
