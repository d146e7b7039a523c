"""Automatic segmentation of many files: one task per file, in this process or on dask.

Every file goes through :func:`~.automatic.segment_all` (the one orchestration loop), here or on
a worker of a ``dask.distributed`` cluster (``client=``; imported only then). A worker opens the
bundle's sessions once per process, whatever the number of files it gets (the same per-process
cache as :mod:`.cluster`'s precompute), reads its file itself (no pixels travel to it through
the scheduler) and returns the file's labels and table rows; the caller writes them, so outputs
are checked before the work and written atomically in one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..engine.automatic import AutoMaskSettings
from ..engine.automatic.linking import LINK_IOU
from ..engine.store.embedding_store import EmbeddingStore
from ..engine.store.names import claim_image, source_of
from ..engine.tiling.tiles import TileSettings
from .automatic import segment_all
from .bundles import Bundle
from .cluster import RETRIES, TaskContext, in_flight, worker_bundle, worker_config, worker_store


@dataclass(frozen=True)
class FileOptions:
    """How every file of a run is segmented (small and picklable; see :func:`segment_all`)."""

    settings: AutoMaskSettings | None = None
    axis: int = 0
    rgb: bool = False
    window: tuple[float, float] | None = None
    slices: slice | None = None
    link_iou: float | None = LINK_IOU
    tile: TileSettings | int | None = None


@dataclass(frozen=True)
class FileResult:
    """One finished file.

    Attributes
    ----------
    position : int
        The file's position in the inputs.
    labels : numpy.ndarray
        ``(n, [m,] rows, cols)`` int32, slice axis first (as :func:`segment_all` gives).
    rows : list of dict
        One row per object and plane (:func:`~.automatic.auto_table_columns`).
    """

    position: int
    labels: np.ndarray
    rows: list


def _segment(bundle: Bundle, store: EmbeddingStore | None, path, image: str,
             opts: FileOptions) -> tuple[np.ndarray, list]:
    res = segment_all(bundle, path, settings=opts.settings, axis=opts.axis, rgb=opts.rgb,
                      window=opts.window, slices=opts.slices, store=store, image=image,
                      link_iou=opts.link_iou, tile=opts.tile)
    return np.asarray(res.labels), res.rows


def segment_file_task(ctx: TaskContext, path: str, image: str,
                      opts: FileOptions) -> tuple[np.ndarray, list]:
    """Task body on a worker: segment one file with the process's bundle (and store)."""
    return _segment(worker_bundle(ctx), worker_store(ctx), path, image, opts)


def iter_segment_files(
    bundle: Bundle,
    paths: Sequence[Path | str],
    names: Sequence[str],
    options: FileOptions | None = None,
    *,
    store: EmbeddingStore | Path | str | None = None,
    client=None,
    threads: int | None = None,
    max_in_flight: int | None = None,
) -> Iterator[FileResult]:
    """Segment every file; yield each as it finishes (in input order without ``client``).

    Parameters
    ----------
    bundle : Bundle
        A bundle with the ``clicks`` capability (its folder readable by every worker at the
        same path).
    paths : sequence of path
        Image files (readable by every worker at the same path).
    names : sequence of str
        Each file's image name in the store (e.g. :func:`~.io.image_names`).
    options : FileOptions, optional
        Settings shared by all files (SAM's defaults, slice axis 0, linked through z).
    store : EmbeddingStore or path, optional
        Read embeddings from (and add to) this store; on a cluster it must be on a file system
        every worker can write (entries of different planes never conflict, see
        :mod:`.cluster`).
    client : dask.distributed.Client, optional
        Run one task per file on its cluster; results come back as tasks finish.
    threads : int, optional
        onnxruntime threads per worker session (default: the bundle's, or 1).
    max_in_flight : int, optional
        Files submitted ahead of the finished ones (default 2 per worker thread): bounds the
        labels waiting in worker memory.
    """
    opts = options or FileOptions()
    st = None if store is None else bundle.open_store(store)
    if st is not None:  # each file's own group (another file of its name keeps its own)
        create = st.mode == "a"
        names = [claim_image(st.path, n, source_of(p), create)
                 for p, n in zip(paths, names, strict=True)]
    if client is None:
        for k, (path, name) in enumerate(zip(paths, names, strict=True)):
            labels, rows = _segment(bundle, st, path, name, opts)
            yield FileResult(k, labels, rows)
        return
    yield from _on_cluster(client, bundle, st, paths, names, opts, threads, max_in_flight)


def _on_cluster(client, bundle, st, paths, names, opts, threads, max_in_flight):
    ctx = TaskContext(str(Path(bundle.folder).resolve()), worker_config(bundle, threads),
                   None if st is None else str(Path(st.path).resolve()),
                   None if st is None else st.bundle, None if st is None else st.precision)
    position = {}
    done = 0

    def submit(task):
        k, (path, name) = task
        fut = client.submit(segment_file_task, ctx, str(Path(path).resolve()), name, opts,
                            pure=False, retries=RETRIES)
        position[fut.key] = k
        return fut

    def failed() -> str:
        return (f"{done} of {len(paths)} files are done; run the same command again (with --store "
                "their embeddings are reused).")

    limit = max_in_flight or 2 * max(1, sum(client.nthreads().values()))
    tasks = enumerate(zip(paths, names, strict=True))
    for future, (labels, rows) in in_flight(client, tasks, submit, limit, failed):
        done += 1
        yield FileResult(position.pop(future.key), labels, rows)
