"""The one labels-file writer: consent before replacing, and the layer geometry a TIFF keeps."""

from __future__ import annotations

import numpy as np
import pytest
import tifffile

from napari_sam3_onnx._napari.tiff_labels_reader import get_reader, read_labels
from napari_sam3_onnx.api.atomic import OutputTakenError
from napari_sam3_onnx.api.labels_files import format_of, write_labels, write_plane_labels


def _planes(n, rows, cols):
    return [np.full((rows, cols), i + 1, np.int32) for i in range(n)]


@pytest.mark.parametrize("name", ["l.ome.tif", "l.npy", "l.zarr", "l.ome.zarr"])
def test_a_file_that_appeared_is_not_replaced_without_consent(tmp_path, name):
    path = tmp_path / name
    write_labels(path, (2, 30, 50), iter(_planes(2, 30, 50)))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(OutputTakenError) as taken:  # the default is: never replace
        write_labels(path, (2, 30, 50), iter(_planes(2, 30, 50)))
    assert taken.value.kept != path and taken.value.kept.exists()
    assert all((tmp_path / p).exists() for p in before)


def test_a_tiff_keeps_the_layer_scale_and_units_of_z_y_x(tmp_path):
    path = tmp_path / "cells.ome.tif"
    write_labels(path, (3, 30, 50), iter(_planes(3, 30, 50)), axes="ZYX",
                 scale=(2.0, 0.5, 0.25), units=("micrometer", "micrometer", "nanometer"))
    assert get_reader(str(path)) is read_labels
    ((data, kwargs, kind),) = read_labels(path)
    assert kind == "labels" and data.dtype == np.int32 and data.shape == (3, 30, 50)
    assert kwargs["scale"] == [2.0, 0.5, 0.25]
    assert kwargs["units"] == ["micrometer", "micrometer", "nanometer"]
    with tifffile.TiffFile(path) as tif:
        assert 'PhysicalSizeXUnit="nm"' in tif.ome_metadata


def test_one_plane_formats_and_names(tmp_path):
    assert [format_of(tmp_path / n) for n in ("a.TIF", "a.tiff", "a.npy", "a.ome.zarr")] == \
        ["tif", "tif", "npy", "ome.zarr"]
    with pytest.raises(ValueError):
        write_plane_labels(tmp_path / "a.zarr", np.zeros((4, 6), np.int32))
    with pytest.raises(ValueError):
        write_plane_labels(tmp_path / "a.tif", np.zeros((4, 6), np.float32))
    assert not list(tmp_path.iterdir())
