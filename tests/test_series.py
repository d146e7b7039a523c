"""Image series (issue 25 item 1): items, the state file, resuming, safe saves, --skip-done."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile

from conftest import blob_image
from napari_sam3_onnx.api.io import InputError
from napari_sam3_onnx.api.series import ImageSeries, LabelsExistError
from napari_sam3_onnx.api.series_items import list_items
from napari_sam3_onnx.api.series_state import STATE_NAME, SeriesState
from napari_sam3_onnx.cli import main

#: Non-square images of different sizes (rows, cols).
SHAPES = {"a": (300, 517), "b": (411, 263), "c": (64, 96)}


def _labels(shape, value=3, where=(10, 30)):
    out = np.zeros(shape, np.int32)
    r, c = where
    out[r:r + 12, c:c + 20] = value
    return out


@pytest.fixture()
def folder(tmp_path):
    src = tmp_path / "images"
    src.mkdir()
    rng = np.random.default_rng(0)
    tifffile.imwrite(src / "a.tif", rng.integers(0, 255, SHAPES["a"], dtype=np.uint8))
    np.save(src / "b.npy", rng.random(SHAPES["b"]).astype(np.float32))
    tifffile.imwrite(src / "c.tiff", rng.integers(0, 4000, SHAPES["c"], dtype=np.uint16))
    return src


def test_items_are_ordered_and_read_with_their_own_shapes(folder):
    items = list_items(folder)
    assert [i.name for i in items] == ["a", "b", "c"]
    assert [i.read().shape for i in items] == list(SHAPES.values())


@pytest.mark.parametrize("fmt", ["tif", "npy", "ome.zarr"])
def test_state_round_trip_and_resume_at_the_first_unfinished(folder, tmp_path, fmt):
    out = tmp_path / "out"
    series = ImageSeries.open(folder, out=out, labels_format=fmt)
    assert series.position == 0 and series.done_flags() == [False] * 3
    labels = _labels(SHAPES["a"])
    path = series.save(0, labels)
    assert path == out / f"a.{fmt}" and path.exists()
    record = json.loads((out / STATE_NAME).read_text())
    entry = record["done"][series.items[0].key]
    assert entry["labels"] == f"a.{fmt}" and entry["format"] == fmt and entry["size"] > 0

    again = ImageSeries.open(folder, out=out, labels_format=fmt)
    assert again.done_flags() == [True, False, False]
    assert again.position == 1  # resumes at the first unfinished image
    np.testing.assert_array_equal(again.load_labels(0), labels)
    assert again.load_labels(1) is None
    again.save(1, _labels(SHAPES["b"], 5))
    assert ImageSeries.open(folder, out=out, labels_format=fmt).position == 2


def test_beside_mode_names_labels_after_the_image_and_never_lists_them(folder):
    series = ImageSeries.open(folder)
    path = series.save(1, _labels(SHAPES["b"]))
    assert path == folder / "b_labels.tif"
    assert (folder / STATE_NAME).exists()
    again = ImageSeries.open(folder)
    assert [i.name for i in again.items] == ["a", "b", "c"]  # b_labels.tif is not an image
    assert again.done_flags() == [False, True, False] and again.position == 0


def test_an_existing_file_is_replaced_only_when_confirmed(folder, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    theirs = out / "a.tif"
    theirs.write_bytes(b"the user's own file")
    series = ImageSeries.open(folder, out=out)
    assert series.needs_confirmation(0)
    with pytest.raises(LabelsExistError):
        series.save(0, _labels(SHAPES["a"]))
    assert theirs.read_bytes() == b"the user's own file"
    assert not series.is_done(0) and not (out / STATE_NAME).exists()
    series.save(0, _labels(SHAPES["a"]), overwrite=True)  # the user said yes
    assert series.is_done(0)
    # the series' own, unchanged file is replaced without asking (a correction)
    assert not series.needs_confirmation(0)
    series.save(0, _labels(SHAPES["a"], 7))
    np.testing.assert_array_equal(series.load_labels(0), _labels(SHAPES["a"], 7))


def test_a_changed_or_missing_saved_file_is_not_done(folder, tmp_path):
    out = tmp_path / "out"
    series = ImageSeries.open(folder, out=out)
    a = series.save(0, _labels(SHAPES["a"]))
    b = series.save(1, _labels(SHAPES["b"]))
    assert series.done_flags() == [True, True, False]
    tifffile.imwrite(a, _labels(SHAPES["a"], 9))  # changed by someone else
    b.unlink()
    assert series.done_flags() == [False, False, False]  # seen by the open series too
    again = ImageSeries.open(folder, out=out)
    assert again.done_flags() == [False, False, False] and again.position == 0
    assert again.needs_confirmation(0)  # the changed file is not ours any more
    with pytest.raises(LabelsExistError):
        again.save(0, _labels(SHAPES["a"]))


def test_outputs_are_checked_before_work(folder, tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ImageSeries.open(folder, out=tmp_path / "no" / "such")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    with pytest.raises(InputError, match="model"):
        ImageSeries.open(folder, out=bundle / "labels", protected=[bundle])
    assert not (bundle / "labels").exists()
    with pytest.raises(InputError, match="holds the images"):
        ImageSeries.open(folder, out=folder)
    series = ImageSeries.open(folder, out=tmp_path / "out")
    with pytest.raises(InputError, match="shape"):
        series.save(0, _labels(SHAPES["b"]))  # another image's shape
    with pytest.raises(InputError, match="no labels"):
        series.save(0, np.zeros(SHAPES["a"], np.int32))


def test_a_damaged_state_file_is_refused_not_replaced(folder, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / STATE_NAME).write_text("{ not json")
    with pytest.raises(InputError, match="series state"):
        ImageSeries.open(folder, out=out)
    assert (out / STATE_NAME).read_text() == "{ not json"


def test_multi_series_tiff_gives_one_item_per_full_size_series(tmp_path):
    path = tmp_path / "wells.ome.tif"
    with tifffile.TiffWriter(path, ome=True) as tw:
        tw.write(blob_image((50, 80), ((10, 10, 5),)), metadata={"axes": "YX"})
        tw.write(blob_image((50, 80), ((30, 60, 6),)), metadata={"axes": "YX"})
    items = list_items(path)
    assert [(i.series, i.name) for i in items] == [(0, "wells_s0"), (1, "wells_s1")]
    assert not np.array_equal(items[0].read(), items[1].read())
    series = ImageSeries.open(path)
    saved = series.save(1, _labels((50, 80)))
    assert saved == tmp_path / "wells_s1_labels.tif"
    assert ImageSeries.open(path).done_flags() == [False, True]


def test_multi_image_ome_zarr_gives_one_item_per_image(tmp_path):
    from napari_sam3_onnx.api.ngff import write_ngff_labels

    container = tmp_path / "plate.zarr"
    container.mkdir()
    import zarr

    zarr.open_group(str(container), mode="a").attrs["bioformats2raw.layout"] = 3
    for k, shape in enumerate([(40, 70), (55, 30)]):
        write_ngff_labels(container / str(k), shape, [np.full(shape, k + 1, np.int32)])
        attrs = zarr.open_group(str(container / str(k)), mode="a").attrs
        attrs.pop("image-label", None)  # an image, not labels (same layout otherwise)
    items = list_items(container)
    assert [i.name for i in items] == ["plate_0", "plate_1"]
    assert [i.read().shape for i in items] == [(40, 70), (55, 30)]
    series = ImageSeries.open(container)
    assert series.target(1) == tmp_path / "plate_1_labels.tif"  # beside, never inside


def _toy_bundle(tmp_path_factory):
    from napari_sam3_onnx.testing.automatic import build_sloped_tracker
    from napari_sam3_onnx.testing.geometry import TestGeometry

    return build_sloped_tracker(tmp_path_factory.mktemp("steep"), TestGeometry(grid=24))


def test_cli_skip_done_skips_what_the_series_saved_and_marks_what_it_does(
        tmp_path, tmp_path_factory, capsys):
    bundle = _toy_bundle(tmp_path_factory)
    src = tmp_path / "in"
    src.mkdir()
    for name, shape in {"wide": (70, 130), "tall": (120, 50), "mid": (60, 90)}.items():
        tifffile.imwrite(src / f"{name}.tif", blob_image(shape, ((20, 25, 8),), value=255))
    out = tmp_path / "out"
    series = ImageSeries.open(src, out=out)  # the widget's series mode saved one image
    assert [i.name for i in series.items] == ["mid", "tall", "wide"]
    mine = _labels((120, 50), 4, (5, 5))
    series.save(1, mine)
    before = (out / "tall.tif").read_bytes()

    args = ["segment-all", str(bundle), str(src), "--out", str(out), "--skip-done",
            "--points-per-side", "4", "--quiet"]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "1 of 3 image(s) already done" in said
    assert (out / "tall.tif").read_bytes() == before  # skipped: the user's labels stay
    assert (out / "mid.tif").exists() and (out / "wide.tif").exists()
    state = SeriesState.load(out / STATE_NAME)
    assert all(state.is_done(i.key) for i in series.items)
    assert ImageSeries.open(src, out=out).first_unfinished() is None  # the widget sees it

    assert main(args) == 0  # nothing left to do
    assert "every image is done already" in capsys.readouterr().out

    tifffile.imwrite(out / "wide.tif", _labels((70, 130), 2))  # changed: not done any more
    assert main(args) != 0  # ... and not replaced without --overwrite
    assert "already exists" in capsys.readouterr().err
    np.testing.assert_array_equal(tifffile.imread(out / "wide.tif"), _labels((70, 130), 2))


def test_png_images_are_items_and_rgb_labels_take_the_plane_shape(tmp_path):
    from skimage.io import imsave

    src = tmp_path / "photos"
    src.mkdir()
    rgb = np.zeros((45, 70, 3), np.uint8)
    rgb[10:20, 30:50] = (200, 40, 10)
    imsave(src / "field.png", rgb, check_contrast=False)
    tifffile.imwrite(src / "gray.tif", blob_image((33, 81)))
    series = ImageSeries.open(src)
    assert [i.name for i in series.items] == ["field", "gray"]
    np.testing.assert_array_equal(series.read(0), rgb)
    path = series.save(0, _labels((45, 70), 2, (5, 5)))
    assert path == src / "field_labels.tif"
    assert [i.name for i in ImageSeries.open(src).items] == ["field", "gray"]


def test_a_stack_in_the_folder_is_refused_when_read(tmp_path):
    src = tmp_path / "mixed"
    src.mkdir()
    tifffile.imwrite(src / "stack.tif", np.zeros((3, 20, 30), np.uint8))
    tifffile.imwrite(src / "plane.tif", np.zeros((1, 20, 30), np.uint8))  # singleton: fine
    series = ImageSeries.open(src)
    assert series.read(0).shape == (20, 30)
    with pytest.raises(InputError, match="2-D images"):
        series.read(1)
