"""Precompute on a dask.distributed cluster: one task per slice, written straight to the store.

Imported only when a cluster is asked for (``client=`` in the API, ``--scheduler`` /
``--workers`` on the command line); a local run never imports dask.distributed.

Each task opens the bundle's ONNX sessions through a per-process cache keyed by the bundle
folder (so a worker loads the encoder once, however many slices it gets), reads its plane (file
inputs are re-opened on the worker, so no pixels travel through the scheduler), and writes its
entry into its own group of the zarr store: slices share no chunk and no metadata file, and an
entry is written whole under a temporary name and renamed into place, so workers never conflict,
even on the same slice. A task that dies half-way leaves no entry (at most a temporary folder),
and the retry (or the next run) encodes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..engine.encoding import SliceRef
from ..engine.store.embedding_store import BundleTag, EmbeddingStore
from ..engine.store.precompute import PrecomputeReport, StoreBackedEncoder
from ..models.bundle import open_adapter as _open_adapter
from ..models.errors import Sam3OnnxError
from ..models.runtime import RuntimeConfig
from .bundles import Bundle
from .jobs import StackJob

#: Attempts after a failed task (a lost worker, a full disk) before the run fails.
RETRIES = 2
T = TypeVar("T")
_CACHE: dict[tuple, object] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class TaskContext:
    """What every task of one run shares (small and picklable): precompute and segment-all.

    ``store``, ``tag`` and ``precision`` are None for a run without an embedding store.
    """

    folder: str
    config: RuntimeConfig
    store: str | None = None
    tag: BundleTag | None = None
    precision: str | None = None


def _cached(key: tuple, make: Callable[[], object]):
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = make()
        return _CACHE[key]


def worker_bundle(ctx: TaskContext) -> Bundle:
    """The process's bundle for ``ctx``, opened once per worker process.

    Precompute and segment-all tasks share it: whichever asks first opens the sessions.
    """
    return _cached(("bundle", ctx.folder, ctx.config), lambda: Bundle(
        _open_adapter(ctx.folder, ctx.config), Path(ctx.folder), ctx.config))


def worker_store(ctx: TaskContext) -> EmbeddingStore | None:
    """The process's embedding store for ``ctx`` (None without one), opened once per worker."""
    where, tag = ctx.store, ctx.tag
    if where is None or tag is None:
        return None
    return _cached(("store", where, tag, ctx.precision),
                   lambda: EmbeddingStore(where, tag, ctx.precision))


def worker_encoder(ctx: TaskContext) -> StoreBackedEncoder:
    """The process's encoder for ``ctx``: sessions and store are opened once per worker."""
    adapter, store = worker_bundle(ctx).adapter, worker_store(ctx)
    if store is None:
        raise ValueError("a precompute task needs an embedding store")
    return _cached(("encoder", ctx), lambda: StoreBackedEncoder(adapter, store))


def encode_slice(ctx: TaskContext, job: StackJob, index: tuple[int, ...], plane=None) -> str:
    """Task body: make sure the store holds ``job``'s plane ``index``; what it took.

    Returns ``"skipped"``, ``"encoded"`` or ``"repaired"`` (see
    :meth:`~napari_sam3_onnx.engine.store.precompute.StoreBackedEncoder.ensure_entry`).

    ``plane`` carries the pixels for in-memory images; file images are read on the worker.
    """
    encoder = worker_encoder(ctx)
    if plane is None:
        view = job.view()
        return encoder.ensure_entry(job.ref(view, index))
    window = None if job.window is None else (float(job.window[0]), float(job.window[1]))
    ref = SliceRef(None, tuple(index), job.rgb, window, source=job.image)
    return encoder.ensure_entry(ref, np.asarray(plane))


def make_client(scheduler: str | None = None, workers: int | None = None,
                processes: bool = True):
    """A ``dask.distributed.Client`` for a scheduler address or a new local cluster.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``).
    workers : int, optional
        Start a ``LocalCluster`` with this many workers, one thread each.
    processes : bool
        Local workers are processes (True; one ONNX session each, no GIL sharing) or threads.
    """
    from dask.distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler)
    cluster = LocalCluster(n_workers=int(workers or 1), threads_per_worker=1,
                           processes=processes, dashboard_address=None)
    return Client(cluster)


def close_client(client) -> None:
    """Close a client and, for a local cluster it started, the cluster."""
    import logging

    # In-process workers sometimes log a closed-comm traceback at INFO while shutting down.
    logging.getLogger("distributed.batched").setLevel(logging.WARNING)
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def precompute_on_cluster(
    client,
    bundle: Bundle,
    jobs: Sequence[StackJob],
    store: EmbeddingStore | Path | str,
    precision: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    max_in_flight: int | None = None,
) -> PrecomputeReport:
    """Fill ``store`` with ``jobs``' planes on the cluster behind ``client``.

    Parameters
    ----------
    client : dask.distributed.Client
        The cluster.
    bundle : Bundle
        The bundle (its folder must be readable by every worker at the same path).
    jobs : sequence of StackJob
        Images; file images are opened on the workers (shared file system), in-memory ones are
        sent one plane per task.
    store : EmbeddingStore or path
        The zarr store (on a file system every worker can write).
    precision : {"fp32", "fp16"}, optional
        Storage precision (default: the store's own).
    progress : callable, optional
        ``progress(done, total)`` in planes, as tasks finish.
    threads : int, optional
        onnxruntime threads per worker session (default: the bundle's setting, or 1 on a
        local cluster of one-thread workers).
    max_in_flight : int, optional
        Tasks submitted ahead of the finished ones (default 4 per worker thread); bounds the
        memory held by in-memory planes waiting on the scheduler.

    Returns
    -------
    PrecomputeReport
    """
    st = bundle.open_store(store, precision)
    st.prepare([job.image for job in jobs])
    ctx = TaskContext(str(Path(bundle.folder).resolve()), worker_config(bundle, threads),
                      str(Path(st.path).resolve()), st.bundle, st.precision)
    tasks = []
    for job in jobs:
        view = job.view()
        file_job = (StackJob(str(Path(str(job.data)).resolve()), job.image, job.axis, job.rgb,
                             job.window, job.slices, job.series) if job.is_file else None)
        for index in job.indices(view):
            tasks.append((file_job, job, view, index))
    report = PrecomputeReport(total=len(tasks))

    def submit(task):
        file_job, job, view, index = task
        if file_job is not None:
            return client.submit(encode_slice, ctx, file_job, index, pure=False,
                                 retries=RETRIES)
        plane = np.asarray(view[tuple(index)])
        light = StackJob(None, job.image, 0, job.rgb, job.window)
        return client.submit(encode_slice, ctx, light, index, plane, pure=False,
                             retries=RETRIES)

    def failed() -> str:
        return (f"{report.done} of {report.total} slices are done and kept; fix the cause (worker "
                "memory, paths every worker can read) and run the same command again to resume.")

    limit = max_in_flight or 4 * max(1, sum(client.nthreads().values()))
    for _future, outcome in in_flight(client, tasks, submit, limit, failed):
        report.count(outcome)
        if progress is not None:
            progress(report.done, report.total)
    return report


def worker_config(bundle: Bundle, threads: int | None) -> RuntimeConfig:
    """The bundle's runtime settings for a worker's sessions, with ``threads`` per session."""
    if threads is None:
        threads = bundle.config.intra_op_threads or 1
    return RuntimeConfig(bundle.config.providers, int(threads), bundle.config.cpu_mem_arena,
                         bundle.config.graph_optimization)


def in_flight(
    client,
    tasks: Iterable[T],
    submit: Callable[[T], Any],
    limit: int,
    failed: Callable[[], str],
) -> Iterator[tuple[Any, Any]]:
    """``(future, result)`` of every task as it finishes, at most ``limit`` submitted at once.

    A task that fails after its retries (or Ctrl+C, or the caller stopping early) cancels the
    tasks still out. Our own errors and interrupts pass through unchanged; any other failure
    becomes a :class:`ClusterTaskError` whose message ends with ``failed()`` (what is kept, how
    to resume).
    """
    from dask.distributed import as_completed

    pending = iter(tasks)
    live = {submit(t) for _, t in zip(range(limit), pending, strict=False)}
    running = as_completed(list(live))
    try:
        for future in running:
            live.discard(future)
            yield future, future.result()
            nxt = next(pending, None)
            if nxt is not None:
                fut = submit(nxt)
                live.add(fut)
                running.add(fut)
    except BaseException as exc:
        client.cancel(list(live))
        if isinstance(exc, (Sam3OnnxError, KeyboardInterrupt)) or not isinstance(exc, Exception):
            raise
        raise ClusterTaskError(
            f"A cluster task failed {RETRIES + 1} times ({type(exc).__name__}: {exc}). "
            + failed()) from exc


class ClusterTaskError(Sam3OnnxError):
    """A slice's task failed on every attempt (a lost worker, out of memory, an unreadable path)."""
