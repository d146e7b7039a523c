"""Precompute on a local dask.distributed cluster: same bytes as one process, retries are safe."""

from __future__ import annotations

import numpy as np
import pytest
import tifffile

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.api import cluster
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.store.embedding_store import ENTRY_KEY, EmbeddingStore

pytest.importorskip("distributed")
N = 6


def stack():
    """uint16 planes that all differ (a blob walks right and brightens with z)."""
    return np.stack([blob_image((60, 90), ((20 + z, 12 + 11 * z, 6),), value=900 + 350 * z,
                                dtype=np.uint16) for z in range(N)])


@pytest.fixture(scope="module")
def tif(tmp_path_factory):
    path = tmp_path_factory.mktemp("dask") / "walk.tif"
    tifffile.imwrite(path, stack(), photometric="minisblack")
    return path


def files(store):
    """Every file of a store, relative path -> bytes."""
    return {p.relative_to(store).as_posix(): p.read_bytes()
            for p in sorted(store.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def single(hf_bundle, tif, tmp_path_factory):
    """The store written by one process, no dask."""
    out = tmp_path_factory.mktemp("single") / "s.zarr"
    assert main(["precompute", str(hf_bundle), str(tif), "--store", str(out), "--fp16",
                 "--window", "0", "3000"]) == 0
    return files(out)


@pytest.mark.slow
def test_two_worker_processes_write_the_same_bytes(hf_bundle, tif, single, tmp_path):
    client = cluster.make_client(workers=2, processes=True)
    try:
        bundle = api.open_bundle(hf_bundle)
        seen = []
        report = api.precompute(bundle, tif, tmp_path / "d.zarr", precision="fp16",
                                window=(0, 3000), client=client,
                                progress=lambda d, t: seen.append(d))
        assert (report.encoded, report.skipped) == (N, 0) and sorted(seen) == list(range(1, 7))
        assert files(tmp_path / "d.zarr") == single
        # each worker process opened the bundle's sessions once, however many slices it got
        opened = client.run(lambda: sum(k[0] == "bundle" for k in cluster._CACHE))
        assert sorted(opened.values()) == [1, 1]
        again = api.precompute(bundle, tif, tmp_path / "d.zarr", window=(0, 3000),
                               client=client)
        assert (again.encoded, again.skipped) == (0, N)
    finally:
        cluster.close_client(client)


def test_a_failed_task_is_retried_without_corrupting_the_store(
        hf_bundle, tif, single, tmp_path, monkeypatch, capsys):
    real_put = EmbeddingStore.put
    failed = []

    def crash_once_after_writing(self, key, embedding):
        out = real_put(self, key, embedding)
        if key.index == (3,) and not failed:
            failed.append(key)  # the arrays are on disk, the marker is not: a half entry
            self._root[key.path].attrs[ENTRY_KEY] = {
                **self._root[key.path].attrs[ENTRY_KEY], "complete": False}
            raise OSError("worker lost mid-write")
        return out

    monkeypatch.setattr(EmbeddingStore, "put", crash_once_after_writing)
    code = main(["precompute", str(hf_bundle), str(tif), "--store", str(tmp_path / "r.zarr"),
                 "--fp16", "--window", "0", "3000", "--workers", "2", "--no-processes"])
    out = capsys.readouterr().out
    # the retry found the half entry and replaced it (and says so)
    assert code == 0 and failed and f"encoded {N} (1 replaced broken entries), skipped 0" in out
    assert files(tmp_path / "r.zarr") == single


def test_in_memory_planes_travel_to_the_workers(hf_bundle, tmp_path):
    data = stack()
    bundle = api.open_bundle(hf_bundle)
    local = api.precompute(bundle, data, tmp_path / "a.zarr", names=["walk"], window=(0, 3000))
    client = cluster.make_client(workers=2, processes=False)
    try:
        spread = api.precompute(bundle, data, tmp_path / "b.zarr", names=["walk"],
                                window=(0, 3000), client=client, slices=slice(1, None))
    finally:
        cluster.close_client(client)
    assert (local.encoded, spread.encoded) == (N, N - 1)
    a, b = files(tmp_path / "a.zarr"), files(tmp_path / "b.zarr")
    assert {k: v for k, v in a.items() if "/00000" not in k} == b


def test_a_task_that_always_fails_is_a_clear_error(hf_bundle, tif, tmp_path, monkeypatch,
                                                    capsys):
    def broken(self, key, embedding):
        raise RuntimeError("no space left on device")

    monkeypatch.setattr(EmbeddingStore, "put", broken)
    code = main(["precompute", str(hf_bundle), str(tif), "--store", str(tmp_path / "x.zarr"),
                 "--workers", "1", "--no-processes"])
    err = capsys.readouterr().err
    assert code == 1 and "failed 3 times (RuntimeError: no space left" in err
    assert "run the same command again" in err and "Traceback" not in err


def _square_or_fail(k):
    if k == 3:
        raise ValueError("worker ran out of memory")
    return k * k


def _refuse(k):
    from napari_sam3_onnx.models.errors import Sam3OnnxError

    raise Sam3OnnxError(f"plane {k} does not fit the store")


def test_in_flight_bounds_the_submitted_tasks_and_says_what_failed():
    # The one submission loop precompute and segment-all share: never more than `limit` tasks
    # out, every result once, and a failing task stops the run with what is kept.
    client = cluster.make_client(workers=1, processes=False)
    try:
        out, limit = [], 2

        def submit(k):
            assert len(out) >= k - limit  # at most `limit` submitted ahead of the finished
            return client.submit(_square_or_fail, k, pure=False)

        got = sorted(r for _f, r in cluster.in_flight(client, [0, 1, 2, 4, 5], submit, limit,
                                                       lambda: "unused") if not out.append(r))
        assert got == [0, 1, 4, 16, 25]
        with pytest.raises(cluster.ClusterTaskError, match=r"ValueError: worker ran out of "
                           r"memory\)\. 2 kept") as err:
            for _ in cluster.in_flight(client, range(6), lambda k: client.submit(
                    _square_or_fail, k, pure=False), 1, lambda: "2 kept"):
                pass
        assert isinstance(err.value.__cause__, ValueError)
        with pytest.raises(Exception, match="does not fit the store") as own:
            list(cluster.in_flight(client, [7], lambda k: client.submit(_refuse, k), 1,
                                   lambda: "unused"))
        assert not isinstance(own.value, cluster.ClusterTaskError)
    finally:
        client.close()


def test_tiles_with_a_client_are_refused_before_any_store_is_made(hf_bundle, tif, tmp_path):
    # Tiled precompute runs in this process only: with a client the tile setting used to be
    # dropped without a word and whole planes were stored where tiles were asked for.
    client = cluster.make_client(workers=1, processes=False)
    try:
        bundle = api.open_bundle(hf_bundle)
        with pytest.raises(ValueError, match="leave out client= or tile="):
            api.precompute(bundle, tif, tmp_path / "t.zarr", window=(0, 3000), client=client,
                           tile=32)
    finally:
        cluster.close_client(client)
    assert not (tmp_path / "t.zarr").exists()


def test_a_worker_opens_a_bundle_once_for_precompute_and_segment_all(hf_bundle, tif, tmp_path,
                                                                    monkeypatch):
    # Both kinds of task share one per-process cache: a worker that encodes slices and then
    # segments files opens the bundle's sessions once, not once per kind of task.
    from napari_sam3_onnx.api import automatic_files
    from napari_sam3_onnx.models import bundle as model_bundle

    opened = []

    def counting_open(folder, config=None):
        opened.append(str(folder))
        return model_bundle.open_adapter(folder, config)

    monkeypatch.setattr(cluster, "_CACHE", {})
    monkeypatch.setattr(cluster, "_open_adapter", counting_open)
    monkeypatch.setattr(automatic_files, "_open_adapter", counting_open, raising=False)
    client = cluster.make_client(workers=1, processes=False)  # the workers share this process
    try:
        bundle = api.open_bundle(hf_bundle)
        api.precompute(bundle, tif, tmp_path / "p.zarr", window=(0, 3000), client=client)
        done = list(automatic_files.iter_segment_files(
            bundle, [tif], ["walk"], automatic_files.FileOptions(window=(0, 3000)),
            client=client))
    finally:
        cluster.close_client(client)
    assert len(done) == 1 and done[0].labels.shape == (N, 60, 90) and done[0].labels.max() > 0
    assert opened == [str(hf_bundle.resolve())]
