"""Labels and table files: any plane size, plane by plane, atomic, replaced only with consent."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from napari_sam3_onnx.api.io import InputError
from napari_sam3_onnx.api.labels_files import write_labels
from napari_sam3_onnx.api.metadata import pixel_size
from napari_sam3_onnx.cli.guard import check_outputs, check_store
from napari_sam3_onnx.cli.result_files import write_table
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

#: The sizes the issue names: square, the common camera chip, large, and long and thin.
SIZES = [(1024, 1024), (1040, 1392), (2048, 2048), (300, 4000)]


def label_planes(n, rows, cols, seed=0):
    """``n`` distinct int32 planes: rectangles with ids, different on every plane."""
    rng = np.random.default_rng(seed)
    out = []
    for z in range(n):
        plane = np.zeros((rows, cols), np.int32)
        for k in range(6):
            r0, c0 = rng.integers(0, rows - 8), rng.integers(0, cols - 8)
            plane[r0:r0 + rng.integers(4, rows // 3 + 5), c0:c0 + rng.integers(4, cols // 3 + 5)] \
                = 1000 * z + k + 1
        plane[-1, -1] = 70000 + z  # the far corner: an edge tile that needs padding
        out.append(plane)
    return out


def read_back(path: Path) -> np.ndarray:
    if path.suffix == ".zarr":
        return np.asarray(zarr.open_array(str(path), mode="r")[...])
    if path.suffix == ".npy":
        return np.load(path)
    return tifffile.imread(path)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("suffix", [".tif", ".npy", ".zarr"])
def test_labels_of_any_plane_size_round_trip(tmp_path, size, suffix):
    planes = label_planes(2, *size)
    path = tmp_path / f"labels{suffix}"
    write_labels(path, (2, *size), iter(planes))
    got = read_back(path)
    assert got.dtype == np.int32 and got.shape == (2, *size)
    np.testing.assert_array_equal(got, np.stack(planes))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary left


def test_tiff_carries_axes_and_pixel_size_for_fiji_and_napari(tmp_path):
    planes = label_planes(3, 300, 4000)
    path = write_labels(tmp_path / "l.tif", (3, 300, 4000), iter(planes), pixel_size=(0.4, 0.65))
    with tifffile.TiffFile(path) as tf:
        assert tf.is_ome and tf.series[0].axes == "ZYX" and tf.series[0].shape == (3, 300, 4000)
        assert len(tf.pages) == 3 and tf.pages[0].is_tiled
    assert pixel_size(path) == pytest.approx((0.4, 0.65))
    four = write_labels(tmp_path / "t.tif", (2, 3, 40, 50), iter(label_planes(6, 40, 50)))
    with tifffile.TiffFile(four) as tf:
        assert tf.series[0].axes == "TZYX" and tf.series[0].shape == (2, 3, 40, 50)
    assert pixel_size(four) is None  # no size invented when the input had none


@pytest.mark.parametrize(("axis", "axes"), [(0, "TZYX"), (1, "ZTYX")])
def test_labels_take_the_inputs_axes_with_the_slice_axis_first(tmp_path, axis, axes):
    from napari_sam3_onnx.cli import main

    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    tifffile.imwrite(tmp_path / "in.tif", np.zeros((2, 3, 60, 90), np.uint8), imagej=True,
                     resolution=(1 / 0.3, 1 / 0.2), metadata={"axes": "TZYX", "unit": "um"})
    assert main(["text", str(folder), str(tmp_path / "in.tif"), "--concepts", "nucleus",
                 "--axis", str(axis), "--out", str(tmp_path / "o.tif")]) == 0
    with tifffile.TiffFile(tmp_path / "o.tif") as tf:
        assert tf.series[0].axes == axes
        assert tf.series[0].shape == ((2, 3) if axis == 0 else (3, 2)) + (60, 90)
    assert pixel_size(tmp_path / "o.tif") == pytest.approx((0.2, 0.3))
    tifffile.imwrite(tmp_path / "plain.tif", np.zeros((3, 60, 90), np.uint8))  # axes unknown
    assert main(["text", str(folder), str(tmp_path / "plain.tif"), "--concepts", "nucleus",
                 "--out", str(tmp_path / "p.tif")]) == 0
    with tifffile.TiffFile(tmp_path / "p.tif") as tf:
        assert tf.series[0].axes == "ZYX"


@pytest.mark.parametrize("suffix", [".tif", ".npy", ".zarr"])
def test_planes_are_written_one_at_a_time(tmp_path, suffix):
    rows, cols, n = 2048, 2048, 8
    plane_bytes = rows * cols * 4

    def planes():
        for z in range(n):
            plane = np.zeros((rows, cols), np.int32)
            plane[z * 100:z * 100 + 50, :] = z + 1
            yield plane

    tracemalloc.start()
    try:
        write_labels(tmp_path / f"big{suffix}", (n, rows, cols), planes())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * plane_bytes, f"peak {peak / plane_bytes:.1f} planes"  # the stack is 8
    assert read_back(tmp_path / f"big{suffix}")[5, 520, 7] == 6


@pytest.mark.parametrize("suffix", [".tif", ".npy", ".zarr"])
def test_an_interrupted_write_leaves_the_old_file_and_foreign_partials_intact(tmp_path, suffix):
    path = tmp_path / f"labels{suffix}"
    write_labels(path, (2, 30, 40), iter(label_planes(2, 30, 40, seed=1)))
    before = read_back(path)
    foreign = tmp_path / f"labels{suffix}.partial"
    foreign.write_bytes(b"the user's own file")

    def dying():
        yield np.ones((30, 40), np.int32)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_labels(path, (2, 30, 40), dying())
    np.testing.assert_array_equal(read_back(path), before)
    assert foreign.read_bytes() == b"the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, foreign.name])
    write_labels(path, (2, 30, 40), iter(label_planes(2, 30, 40, seed=2)),
                 replace=True)  # a consented replace
    np.testing.assert_array_equal(read_back(path), np.stack(label_planes(2, 30, 40, seed=2)))
    assert foreign.read_bytes() == b"the user's own file"


def test_table_is_written_atomically(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("old\n")

    def rows():
        yield {"a": 1}
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_table(path, ["a"], rows())
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]


@pytest.fixture
def scene(tmp_path):
    (tmp_path / "in.tif").write_bytes(b"raw data")
    (tmp_path / "seeds.tif").write_bytes(b"hand painted")
    (tmp_path / "emb.zarr").mkdir()
    (tmp_path / "emb.zarr" / "zarr.json").write_text('{"node_type": "group"}')
    (tmp_path / "sub").mkdir()
    return tmp_path


def protected(d):
    return [("input image", d / "in.tif"), ("seed labels", d / "seeds.tif"),
            ("embedding store", d / "emb.zarr")]


@pytest.mark.parametrize(("out", "message"), [
    ("in.tif", "is the input image"),
    ("sub/../in.tif", "is the input image"),
    ("link.tif", "is the input image"),
    ("hard.tif", "is the input image"),
    ("seeds.tif", "is the seed labels"),
    ("emb.zarr", "is the embedding store"),
    ("emb.zarr/inner.zarr", "is inside the embedding store"),
])
def test_inputs_are_refused_as_outputs_even_with_overwrite(scene, monkeypatch, out, message):
    os.symlink(scene / "in.tif", scene / "link.tif")
    os.link(scene / "in.tif", scene / "hard.tif")
    monkeypatch.chdir(scene)
    with pytest.raises(InputError, match=message) as info:
        check_outputs([("--out", Path(out))], protected(scene), overwrite=True)
    msg = str(info.value)  # names both paths: the output as given, then the protected one
    assert msg.startswith(f"--out {out} ")
    assert any(str(scene / n) in msg for n in ("in.tif", "seeds.tif", "emb.zarr"))
    assert (scene / "in.tif").read_bytes() == b"raw data"


def test_existing_outputs_need_overwrite_and_folders_are_never_replaced(scene):
    (scene / "old.tif").write_bytes(b"yesterday")
    with pytest.raises(InputError, match="already exists; pass --overwrite"):
        check_outputs([("--out", scene / "old.tif")], protected(scene))
    check_outputs([("--out", scene / "old.tif")], protected(scene), overwrite=True)
    with pytest.raises(InputError, match="is a folder"):
        check_outputs([("--out", scene / "sub")], [], overwrite=True)
    (scene / "notes.zarr").mkdir()
    (scene / "notes.zarr" / "readme.txt").write_text("mine")
    with pytest.raises(InputError, match="not a zarr array folder"):
        check_outputs([("--out", scene / "notes.zarr")], [], overwrite=True)
    arr = zarr.create_array(str(scene / "old.zarr"), shape=(2, 3), dtype="int32")
    arr[...] = 1
    check_outputs([("--out", scene / "old.zarr")], [], overwrite=True)  # ours to replace
    with pytest.raises(InputError, match="name the same file"):
        check_outputs([("--out", scene / "a.tif"), ("--table", scene / "sub/../a.tif")], [])


def test_output_folders_are_checked_before_any_work(scene, monkeypatch):
    with pytest.raises(InputError, match="does not exist"):
        check_outputs([("--out", scene / "nowhere" / "o.tif")], [])
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == scene / "sub"
                        else real_access(p, mode))
    with pytest.raises(InputError, match="permission denied"):
        check_outputs([("--table", scene / "sub" / "t.csv")], [])
    with pytest.raises(InputError, match="permission denied"):
        check_store(scene / "sub" / "new.zarr", [])
    with pytest.raises(InputError, match="is a file"):
        check_store(scene / "in.tif", [])
    with pytest.raises(InputError, match="is the input image"):
        check_store(scene / "in.tif", [("input image", scene / "in.tif")])
    with pytest.raises(InputError, match="contains the input image"):
        check_store(scene, [("input image", scene / "in.tif")])
