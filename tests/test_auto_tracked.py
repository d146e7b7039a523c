"""3-D ids by propagation: automatic objects of a key plane carried through z with memory."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.api.automatic_tracked import segment_all_tracked
from napari_sam3_onnx.engine.automatic import AutoMaskSettings
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
