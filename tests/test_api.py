"""The headless Python API: lazy readers, axis views, segment and text search on arrays."""

from __future__ import annotations

import numpy as np
import pytest
import tifffile
import zarr

from conftest import blob_image, disc
from napari_sam3_onnx import api
from napari_sam3_onnx.api.io import AxisView, image_names, parse_slices, plane_indices
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.testing.pagarcia import build_pagarcia
from napari_sam3_onnx.testing.scenes import BLOBS, planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

#: (t, z, rows, cols): every axis a different length, every plane different.
TZYX = np.arange(2 * 3 * 5 * 7, dtype=np.uint16).reshape(2, 3, 5, 7)


def test_axis_view_matches_numpy_for_every_axis():
    for axis in range(4):
        want = np.moveaxis(TZYX, axis, 0)
        view = AxisView(TZYX, order=[axis] + [a for a in range(4) if a != axis])
        assert view.shape == want.shape
        for index in [*np.ndindex(*want.shape[:2]), *((k,) for k in range(want.shape[0]))]:
            np.testing.assert_array_equal(view[index], want[index])
        np.testing.assert_array_equal(np.asarray(view), want)
    dropped = AxisView(TZYX[:1], drop=[0])
    assert dropped.shape == (3, 5, 7)
    np.testing.assert_array_equal(dropped[(2,)], TZYX[0, 2])


def test_readers_are_lazy_and_agree(tmp_path):
    np.save(tmp_path / "a.npy", TZYX)
    tifffile.imwrite(tmp_path / "a.tif", TZYX, photometric="minisblack")
    zarr.save_array(str(tmp_path / "a.zarr"), TZYX, zarr_format=3)
    ome = zarr.open_group(str(tmp_path / "ome.zarr"), mode="w", zarr_format=3)
    ome.create_array("0", data=TZYX[:1, None])  # (t=1, c=1, z, y, x)
    ome.attrs["ome"] = {"multiscales": [{"axes": [{"name": n} for n in "tczyx"],
                                         "datasets": [{"path": "0"}]}]}
    for name in ("a.npy", "a.tif", "a.zarr"):
        data = api.read_image(tmp_path / name)
        assert data.shape == TZYX.shape
        assert isinstance(data, np.memmap) or not isinstance(data, np.ndarray)  # not loaded
        np.testing.assert_array_equal(np.asarray(data[1, 2]), TZYX[1, 2])
    ome_data = api.read_image(tmp_path / "ome.zarr")
    assert ome_data.shape == (3, 5, 7)
    np.testing.assert_array_equal(ome_data[(1,)], TZYX[0, 1])
    ome["0"].resize((1, 2, 3, 5, 7))  # two channels: refused, not read as a stack
    with pytest.raises(api.InputError, match="2 channels"):
        api.read_image(tmp_path / "ome.zarr")
    two = zarr.open_group(str(tmp_path / "two.zarr"), mode="w")
    two.create_array("x", shape=(2, 2), dtype="u1")
    two.create_array("y", shape=(2, 2), dtype="u1")
    with pytest.raises(api.InputError, match="name one"):
        api.read_image(tmp_path / "two.zarr")
    assert image_names([tmp_path / "a.npy", tmp_path / "a.tif", tmp_path / "sub" / "b.tif"]) \
        == ["a.npy", "a.tif", "sub__b"]


def test_plane_indices_and_slices():
    assert plane_indices(TZYX, slices=parse_slices("1:")) == [(1, 0), (1, 1), (1, 2)]
    assert plane_indices(TZYX[0, 0]) == [()]
    assert parse_slices("3") == slice(3, 4) and parse_slices("-1") == slice(-1, None)
    with pytest.raises(api.InputError):
        parse_slices("a:b")


@pytest.fixture(scope="module")
def hf(hf_bundle):
    return api.open_bundle(hf_bundle)


def test_segment_a_plane_of_a_stack_through_the_store(hf, tmp_path):
    blobs = [((15 + 10 * z, 20 + 15 * z, 6),) for z in range(3)]  # the blob moves with z
    data = np.stack([blob_image((60, 90), b, value=3000, dtype=np.uint16) for b in blobs])
    store = tmp_path / "s.zarr"
    api.precompute(hf, data, store, window=(0, 3000))
    hf.cache.clear()
    calls = hf.adapter.encode

    def boom(rgb):
        raise AssertionError("not read from the store")

    hf.adapter.encode = boom
    try:
        res = api.segment(hf, data, [[35, 50]], index=(2,), window=(0, 3000), store=store)
    finally:
        hf.adapter.encode = calls
    truth = disc((60, 90), 35, 50, 6)
    assert (res.mask & truth).sum() / (res.mask | truth).sum() > 0.75
    np.testing.assert_array_equal(
        api.segment(hf, np.moveaxis(data, 0, 2), [[35, 50]], index=(2,), axis=2,
                    window=(0, 3000)).mask, res.mask)
    with pytest.raises(PromptError):
        api.segment(hf, data, index=(0,))


def test_search_text_writes_into_a_given_array(tmp_path):
    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    bundle = api.open_bundle(folder)
    image = planted_image()  # (60, 90, 3) uint8
    out = zarr.create_array(str(tmp_path / "l.zarr"), shape=(2, 60, 90), dtype="int32")
    res = api.search_text(bundle, np.stack([image, image[:, ::-1]]), "bright", rgb=True,
                          out=out)
    assert res.searched == 2 and len(res.rows) == 4
    top = BLOBS[0]
    assert out[0, top.r0 + 2, top.c0 + 2] > 0 and out[1, top.r0 + 2, top.c0 + 2] == 0
    assert out[1, top.r0 + 2, 89 - top.c0 - 2] > 0  # mirrored on the second slice
    assert bundle.texts.calls == 1


def test_propagate_through_the_api(tmp_path):
    bundle = api.open_bundle(build_pagarcia(tmp_path / "pag"))
    rr, cc = np.mgrid[:60, :90]
    data = np.zeros((6, 60, 90), np.uint8)
    for z in range(6):
        data[z][(rr - 30) ** 2 + (cc - (15 + 4 * z)) ** 2 <= 36] = 200
    labels, result = api.propagate(bundle, data, {4: api.Seed.clicks(2, [[30, 23]])},
                                   store=tmp_path / "p.zarr")
    assert labels.shape == (6, 60, 90) and set(np.unique(labels)) == {0, 4}
    for z in range(6):
        assert labels[z, 30, 15 + 4 * z] == 4 and labels[z, 30, 30 + 4 * z] == 0
    assert result.encoder_calls == 6
    again, result = api.propagate(bundle, data, {4: api.Seed.clicks(2, [[30, 23]])},
                                  store=tmp_path / "p.zarr")
    np.testing.assert_array_equal(again, labels)
    assert result.encoder_calls == 0  # every slice came from the store
    with pytest.raises(PromptError):
        api.propagate(bundle, data[0], {1: api.Seed.clicks(0, [[30, 15]])})


def test_a_dask_stack_is_read_plane_by_plane(hf, tmp_path):
    da = pytest.importorskip("dask.array")
    planes = np.stack([blob_image((60, 90), ((20, 15 + 20 * z, 6),), value=200) for z in range(4)])
    lazy = da.from_array(planes, chunks=(1, 60, 90))
    read = []

    def spy(block, block_info=None):
        read.append(block_info[0]["chunk-location"][0])
        return block

    watched = lazy.map_blocks(spy, dtype=lazy.dtype)
    report = api.precompute(hf, watched, tmp_path / "d.zarr", slices=slice(1, 3))
    assert (report.encoded, sorted(set(read))) == (2, [1, 2])  # only the chosen planes
    eager = api.precompute(hf, planes, tmp_path / "d.zarr")
    assert (eager.encoded, eager.skipped) == (2, 2)  # same pixels, same entries
