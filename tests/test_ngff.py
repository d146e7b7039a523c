"""OME-Zarr (NGFF) labels from the batch commands: metadata by the spec, safety, memory."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import zarr

from napari_sam3_onnx.api.io import InputError, read_image
from napari_sam3_onnx.api.labels_files import write_labels
from napari_sam3_onnx.api.metadata import image_axes, pixel_size
from napari_sam3_onnx.api.ngff import write_ngff_labels
from napari_sam3_onnx.cli.guard import check_outputs
from napari_sam3_onnx.cli.result_files import check_labels_path
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03


def label_planes(n, rows, cols, seed=0):
    """``n`` distinct int32 planes of rectangles, ids different on every plane."""
    rng = np.random.default_rng(seed)
    out = []
    for z in range(n):
        plane = np.zeros((rows, cols), np.int32)
        for k in range(5):
            r0, c0 = rng.integers(0, rows - 8), rng.integers(0, cols - 8)
            plane[r0:r0 + rng.integers(4, rows // 3), c0:c0 + rng.integers(4, cols // 3)] = \
                1000 * z + k + 1
        plane[-1, -1] = 70000 + z  # the far corner: on level 0 only if rows, cols are even
        out.append(plane)
    return out


def ngff_attrs(path: Path) -> dict:
    """The NGFF attributes of a group, whichever zarr format (0.5 keeps them under "ome")."""
    attrs = zarr.open_group(str(path), mode="r").attrs.asdict()
    return {**attrs, **attrs.get("ome", {})}


def make_image(path: Path, zarr_format: int, shape=(3, 70, 110), scale=(2.0, 0.4, 0.65)):
    """An OME-Zarr image (0.4 in zarr 2, 0.5 in zarr 3) of a ramp, with pixel sizes in um."""
    version = "0.4" if zarr_format == 2 else "0.5"
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    arr = root.create_array("0", shape=shape, dtype="uint16", chunks=(1, *shape[1:]))
    arr[...] = np.arange(np.prod(shape), dtype=np.uint16).reshape(shape)
    ms = {"axes": [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"],
          "datasets": [{"path": "0", "coordinateTransformations": [
              {"type": "scale", "scale": list(scale)}]}]}
    if zarr_format == 2:
        root.attrs.update({"multiscales": [{"version": version, **ms}]})
    else:
        root.attrs.update({"ome": {"version": version, "multiscales": [ms]}})
    return path


def digest_outside_labels(image: Path) -> str:
    """A hash of every file of the image except its labels/ folder."""
    h = hashlib.sha256()
    for f in sorted(image.rglob("*")):
        if f.is_file() and "labels" not in f.relative_to(image).parts:
            h.update(str(f.relative_to(image)).encode() + f.read_bytes())
    return h.hexdigest()


def test_standalone_labels_follow_ngff_0_4_with_axes_scale_levels_and_colours(tmp_path):
    rows, cols = 1040, 2392  # non-square, large enough for two pyramid levels
    planes = label_planes(3, rows, cols, seed=3)
    path = write_labels(tmp_path / "labels.ome.zarr", (3, rows, cols), iter(planes),
                        pixel_size=(0.4, 0.65), axes="ZYX")
    assert (path / ".zgroup").is_file() and not (path / "zarr.json").exists()  # zarr format 2
    attrs = ngff_attrs(path)
    ms = attrs["multiscales"][0]
    assert ms["version"] == "0.4" and attrs["image-label"]["version"] == "0.4"
    assert ms["axes"] == [{"name": "z", "type": "space"},
                          {"name": "y", "type": "space", "unit": "micrometer"},
                          {"name": "x", "type": "space", "unit": "micrometer"}]
    scales = [d["coordinateTransformations"][0]["scale"] for d in ms["datasets"]]
    assert scales == [[1.0, 0.4, 0.65], [1.0, 0.8, 1.3], [1.0, 1.6, 2.6]]
    stack = np.stack(planes)
    group = zarr.open_group(str(path), mode="r")
    for level, d in enumerate(ms["datasets"]):
        f = 2 ** level
        array = group[d["path"]]
        assert array.dtype == np.int32 and array.chunks[0] == 1
        np.testing.assert_array_equal(array[...], stack[:, ::f, ::f])
    colours = {c["label-value"]: c["rgba"] for c in attrs["image-label"]["colors"]}
    assert sorted(colours) == sorted(set(np.unique(stack).tolist()) - {0})
    assert len({tuple(v) for v in colours.values()}) == len(colours)  # one colour per id
    # What this project reads back: the array, its axes and its pixel size.
    np.testing.assert_array_equal(read_image(path)[1], stack[1])
    assert image_axes(path) == "ZYX" and pixel_size(path) == pytest.approx((0.4, 0.65))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.ome.zarr"]


def test_unknown_pixel_size_and_axes_invent_nothing(tmp_path):
    path = write_labels(tmp_path / "l.ome.zarr", (2, 3, 40, 50), iter(label_planes(6, 40, 50)))
    ms = ngff_attrs(path)["multiscales"][0]
    assert [a["name"] for a in ms["axes"]] == ["t", "z", "y", "x"]
    assert not any("unit" in a for a in ms["axes"])
    assert ms["datasets"][0]["coordinateTransformations"][0]["scale"] == [1.0] * 4
    assert pixel_size(path) is None


def test_ngff_planes_are_written_one_at_a_time(tmp_path):
    rows, cols, n = 2048, 3000, 8
    plane_bytes = rows * cols * 4

    def planes():
        for z in range(n):
            plane = np.zeros((rows, cols), np.int32)
            plane[z * 100:z * 100 + 50, :] = z + 1
            yield plane

    tracemalloc.start()
    try:
        write_labels(tmp_path / "big.ome.zarr", (n, rows, cols), planes())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * plane_bytes, f"peak {peak / plane_bytes:.1f} planes"  # the stack is 8
    assert zarr.open_group(str(tmp_path / "big.ome.zarr"), mode="r")["0"][4, 420, 7] == 5


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_labels_go_into_an_ome_zarr_image_without_touching_its_arrays(tmp_path, zarr_format):
    from napari_sam3_onnx.cli import main

    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    image = make_image(tmp_path / "img.ome.zarr", zarr_format)
    before = digest_outside_labels(image)
    out = image / "labels" / "sam3"
    run = ["text", str(folder), str(image), "--concepts", "nucleus", "--out", str(out)]
    assert main(run) == 0
    assert digest_outside_labels(image) == before
    labels_attrs = ngff_attrs(image / "labels")
    assert labels_attrs["labels"] == ["sam3"]
    attrs = ngff_attrs(out)
    assert attrs["image-label"]["source"] == {"image": "../../"}
    ms = attrs["multiscales"][0]
    assert [a["name"] for a in ms["axes"]] == ["z", "y", "x"]
    # The image's own scale on every axis (z too), so labels and image overlay in a viewer.
    assert ms["datasets"][0]["coordinateTransformations"][0]["scale"] == [2.0, 0.4, 0.65]
    assert [a.get("unit") for a in ms["axes"]] == ["micrometer"] * 3
    if zarr_format == 3:  # NGFF 0.5: zarr 3, metadata under "ome", version there only
        assert json.loads((out / "zarr.json").read_text())["attributes"]["ome"]["version"] \
            == "0.5"
        assert "version" not in ms
    else:
        assert (out / ".zgroup").is_file() and ms["version"] == "0.4"
    assert zarr.open_group(str(out), mode="r")["0"].shape == (3, 70, 110)
    # Next to the image, the labels take its scale too; along another axis only (y, x) sizes
    # of a plane could carry over, and those planes are other cuts: no size is claimed.
    beside = tmp_path / "beside.ome.zarr"
    assert main(["text", str(folder), str(image), "--concepts", "nucleus", "--out",
                 str(beside)]) == 0
    assert ngff_attrs(beside)["multiscales"][0]["datasets"][0]["coordinateTransformations"] \
        == [{"type": "scale", "scale": [2.0, 0.4, 0.65]}]
    across = tmp_path / "across.ome.zarr"
    assert main(["text", str(folder), str(image), "--concepts", "nucleus", "--axis", "2",
                 "--out", str(across)]) == 0
    ms_across = ngff_attrs(across)["multiscales"][0]
    assert ms_across["datasets"][0]["coordinateTransformations"][0]["scale"] == [1.0] * 3
    # A second run needs --overwrite and replaces only the labels group.
    assert main(run) == 2
    assert main([*run, "--overwrite"]) == 0
    assert digest_outside_labels(image) == before
    assert ngff_attrs(image / "labels")["labels"] == ["sam3"]
    # The image itself stays refused as an output, with a hint at labels/NAME.
    with pytest.raises(InputError, match=r"is the input image.*labels"):
        check_outputs([("--out", check_labels_path(image))], [("input image", image)],
                      overwrite=True)
    with pytest.raises(InputError, match="is inside the input image"):
        check_outputs([("--out", image / "0" / "x.zarr")], [("input image", image)],
                      overwrite=True)
    assert digest_outside_labels(image) == before


def test_foreign_folders_under_labels_are_never_replaced(tmp_path):
    image = make_image(tmp_path / "img.ome.zarr", 2)
    (image / "labels" / "mine").mkdir(parents=True)
    (image / "labels" / "mine" / "notes.txt").write_text("hand made")
    with pytest.raises(InputError, match="not a zarr array folder"):
        check_outputs([("--out", image / "labels" / "mine")], [("input image", image)],
                      overwrite=True)
    other = make_image(tmp_path / "other.ome.zarr", 2)
    with pytest.raises(InputError, match="not a zarr array folder"):
        check_outputs([("--out", other)], [], overwrite=True)  # an image is not labels
    assert (image / "labels" / "mine" / "notes.txt").read_text() == "hand made"


def test_an_interrupted_write_into_an_image_leaves_its_labels_as_they_were(tmp_path):
    image = make_image(tmp_path / "img.ome.zarr", 3)
    out = image / "labels" / "cells"
    first = label_planes(3, 70, 110, seed=4)
    write_ngff_labels(out, (3, 70, 110), iter(first))

    def dying():
        yield np.ones((70, 110), np.int32)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_ngff_labels(out, (3, 70, 110), dying())
    with pytest.raises(KeyboardInterrupt):
        write_ngff_labels(image / "labels" / "new", (3, 70, 110), dying())
    np.testing.assert_array_equal(zarr.open_group(str(out), mode="r")["0"][...],
                                  np.stack(first))
    assert sorted(p.name for p in (image / "labels").iterdir()) == ["cells", "zarr.json"]
    assert ngff_attrs(image / "labels")["labels"] == ["cells"]


def test_labels_of_a_tczyx_image_take_its_scale_and_translation_without_c_and_t(tmp_path):
    import napari_sam3_onnx.api.ngff as ngff

    root = zarr.open_group(str(tmp_path / "img.ome.zarr"), mode="w", zarr_format=2)
    root.create_array("0", shape=(1, 1, 4, 30, 50), dtype="uint8")
    root.attrs.update({"multiscales": [{"version": "0.4", "axes": [
        {"name": "t", "type": "time"}, {"name": "c", "type": "channel"},
        *({"name": n, "type": "space", "unit": "micrometer"} for n in "zyx")],
        "datasets": [{"path": "0", "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 1.0, 3.0, 0.2, 0.3]},
            {"type": "translation", "translation": [0.0, 0.0, 6.0, 1.0, 2.0]}]}]}]})
    image = tmp_path / "img.ome.zarr"
    got = ngff.image_transform(image, (4, 30, 50))
    assert got == {"scale": [3.0, 0.2, 0.3], "translation": [6.0, 1.0, 2.0],
                   "units": ["micrometer"] * 3, "axes": "zyx"}
    assert ngff.image_transform(image, (4, 50, 30)) is None  # not labels of this image
    out = write_ngff_labels(image / "labels" / "a", (4, 30, 50),
                            iter(label_planes(4, 30, 50)), scale=[1, 1, 1])
    transforms = ngff_attrs(out)["multiscales"][0]["datasets"][0]["coordinateTransformations"]
    assert transforms == [{"type": "scale", "scale": [3.0, 0.2, 0.3]},
                          {"type": "translation", "translation": [6.0, 1.0, 2.0]}]
