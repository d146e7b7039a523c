"""A store filled by precompute is found by a viewer's encoder whatever the image is called."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.store.embedding_store import BundleTag, EmbeddingStore, EntryStatus
from napari_sam3_onnx.engine.store.lookup import LookupStoreEncoder, same_model_input
from napari_sam3_onnx.engine.store.precompute import StoreBackedEncoder, precompute
from napari_sam3_onnx.models.bundle import open_adapter


@pytest.fixture(scope="module")
def adapter(hf_bundle):
    return open_adapter(hf_bundle)


def stack(n=4, shape=(60, 90), dtype=np.uint16, top=3000):
    """Planes that all differ; each holds 0 and ``top`` (so min..max equals (0, top))."""
    planes = []
    for z in range(n):
        value = top // 2 + top // 10 * z
        p = blob_image(shape, ((20 + z, 15 + 12 * z, 6),), value=value, dtype=dtype)
        p[0, 0], p[-1, -1] = 0, top
        planes.append(p)
    return np.stack(planes)


def refs(data, source, window=None):
    return [SliceRef(data, (z,), window=window, source=source) for z in range(data.shape[0])]


def filled(tmp_path, adapter, hf_bundle, data, name="stack", window=None):
    tag = BundleTag.for_folder(hf_bundle, adapter.layout)
    cli = StoreBackedEncoder(adapter, EmbeddingStore(tmp_path / "s.zarr", tag))
    assert precompute(cli, refs(data, name, window)).encoded == len(data)
    return tag


def test_same_model_input_compares_the_pictures_not_the_numbers():
    u8 = stack(dtype=np.uint8, top=255)[1]
    assert same_model_input(u8, False, (0.0, 255.0), None)
    assert not same_model_input(u8, False, (0.0, 200.0), None)
    u16 = stack()[2]
    assert same_model_input(u16, False, (0.0, 3000.0), None)  # the plane's own min..max
    assert not same_model_input(u16, False, (0.0, 4000.0), None)


def test_a_renamed_layer_under_its_display_window_reads_every_plane(tmp_path, adapter, hf_bundle):
    data = stack()
    tag = filled(tmp_path, adapter, hf_bundle, data)  # the CLI: name "stack", no window
    store = EmbeddingStore(tmp_path / "s.zarr", tag, mode="r")
    enc = LookupStoreEncoder(adapter, store, image_name=lambda ref: "my cells (renamed)")
    direct = StoreBackedEncoder(adapter, store)
    for ref in refs(data, "layer-uid", window=(0.0, 3000.0)):
        got = enc.embed(ref)
        want = adapter.encode(direct.rgb(ref))
        for name, arr in want.features.items():
            np.testing.assert_array_equal(got.features[name], arr)
    assert enc.encoder_calls == 0 and enc.found == 4 and store.hits == 4


def test_other_data_or_another_picture_is_encoded_not_served(tmp_path, adapter, hf_bundle):
    data = stack()
    tag = filled(tmp_path, adapter, hf_bundle, data)
    store = EmbeddingStore(tmp_path / "s.zarr", tag)
    enc = LookupStoreEncoder(adapter, store, image_name=lambda ref: "stack")
    enc.embed(refs(data, "a", window=(0.0, 2000.0))[1])  # another contrast: another picture
    other = data[::-1].copy()  # same name and shape, other planes at each index
    enc.embed(refs(other, "b")[0])
    assert enc.encoder_calls == 2 and enc.found == 0
    # neither replaced what precompute stored at stack/00001 and stack/00000
    assert enc.not_written == 2 and store.writes == 0
    check = StoreBackedEncoder(adapter, store)
    for z in (0, 1):
        k = check.entry_key(refs(data, "stack")[z], data[z])
        assert store.check(k) is EntryStatus.COMPLETE


def test_new_planes_are_added_under_the_name_found(tmp_path, adapter, hf_bundle):
    data = stack(5)
    tag = BundleTag.for_folder(hf_bundle, adapter.layout)
    cli = StoreBackedEncoder(adapter, EmbeddingStore(tmp_path / "s.zarr", tag))
    precompute(cli, refs(data, "stack")[:3])
    store = EmbeddingStore(tmp_path / "s.zarr", tag)
    enc = LookupStoreEncoder(adapter, store, image_name=lambda ref: "renamed")
    for ref in refs(data, "uid"):
        enc.embed(ref)
    assert (enc.found, enc.encoder_calls, store.writes) == (3, 2, 2)
    assert sorted(store.entries("stack")) == [f"{z:05d}" for z in range(5)]
    again = LookupStoreEncoder(adapter, EmbeddingStore(tmp_path / "s.zarr", tag, mode="r"))
    for ref in refs(data, "other-uid"):
        again.embed(ref)
    assert again.encoder_calls == 0


def test_a_store_tiled_at_the_input_side_serves_the_widgets_default_tiles(
        tmp_path, adapter, hf_bundle):
    from napari_sam3_onnx import api
    from napari_sam3_onnx.engine.tiling.tiled import input_side, tile_refs
    from napari_sam3_onnx.engine.tiling.tiles import TileSettings

    side = input_side(adapter)
    plane = blob_image((2 * side + 37, 3 * side + 11), ((40, 50, 9), (side + 20, 2 * side, 12)),
                       value=2500, dtype=np.uint16)
    bundle = api.Bundle(adapter, hf_bundle)
    report = api.precompute(bundle, plane, tmp_path / "t.zarr", names=["big"], tile=side,
                            window=(0.0, 2500.0))
    assert report.encoded > 1
    store = EmbeddingStore(tmp_path / "t.zarr", bundle.tag, mode="r")
    enc = LookupStoreEncoder(adapter, store, image_name=lambda ref: "layer")
    ref = SliceRef(plane, (), window=(0.0, 2500.0), source="uid")
    tiles = tile_refs(ref, TileSettings(), side)  # the Clicks tab's "tile large planes"
    assert len(tiles) == report.encoded
    for tile in tiles:
        enc.embed(tile)
    assert enc.encoder_calls == 0 and enc.found == len(tiles)
