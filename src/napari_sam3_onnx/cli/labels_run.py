"""What the image commands share: their input, bundle, store and outputs, checked before any work.

Every command that writes a labels stack (``text``, ``segment-all``, ``propagate``, ``refine``)
opens its input lazily (:class:`~..api.jobs.StackJob`), checks ``--out``/``--table`` and the
store before the bundle runs, and writes its labels plane by plane (:func:`write_labels_run`,
or :func:`scratch_labels` for a run that writes planes out of order).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import api
from ..api.io import InputError, expand_inputs, image_names, parse_slices
from ..api.jobs import StackJob, claim_names
from ..api.labels_files import write_labels
from ..api.metadata import KNOWN_AXES, image_axes, pixel_size
from ..api.provenance import Provenance, sidecar
from ..api.validate import check_window
from ..api.workspace import Workspace
from ..engine.cache import EmbeddingCache
from ..engine.encoding import SliceRef
from ..engine.tiling.tiles import as_tiling
from ..models.base import Capability
from .guard import bundle_paths, check_outputs, check_store
from .progress import Bar
from .result_files import check_labels_path, write_table
from .signals import RunRecord


def _window(args: argparse.Namespace) -> tuple[float, float] | None:
    if args.window is None:
        return None
    try:
        return check_window(args.window)
    except InputError as exc:
        raise InputError(f"--window {args.window[0]:g} {args.window[1]:g}: "
                         f"{str(exc).split(': ', 1)[1]}") from None


def _bundle(args: argparse.Namespace) -> api.Bundle:
    return api.open_bundle(args.bundle, args.providers, args.threads or 0)


def _job(args: argparse.Namespace, path: Path, name: str) -> StackJob:
    job = StackJob(path, name, args.axis, args.rgb, _window(args), parse_slices(args.slices),
                   getattr(args, "series", None))
    job.indices()  # opens the file and checks its dimensionality and the slice range now
    return job


def _one_input(args: argparse.Namespace, command: str) -> Path:
    path = expand_inputs([args.input], skip=[getattr(args, "store", None)])
    if len(path) != 1:
        raise InputError(f"{args.input} holds {len(path)} images; give one file to "
                         f"'{command}'.")
    return path[0]


def _labels_metadata(args: argparse.Namespace, path: Path, ndim: int) -> dict:
    """``pixel_size`` and ``axes`` of the labels, from the input when it records them.

    The labels have the input's axes with the slice axis moved first (and no colour axis).
    When the slice axis is one of the plane's own axes the planes are other cuts through the
    data: then neither the pixel size nor the axis names carry over.
    """
    lead = ndim - (3 if args.rgb else 2)
    if lead > 0 and args.axis % ndim >= lead:
        return {}
    series = getattr(args, "series", None)
    meta: dict = {"pixel_size": pixel_size(path, series)}
    if lead == 0 or args.axis % ndim == 0:
        meta["like"] = path  # the input's own axis order: an OME-Zarr input lends its scale
    axes = image_axes(path, series)
    if axes is not None and len(axes) == ndim:
        axis = args.axis % ndim if lead else 0
        order = [axis] + [a for a in range(ndim) if a != axis] if lead else list(range(ndim))
        out = "".join(axes[a] for a in order)[: ndim - (1 if args.rgb else 0)]
        if out.endswith("YX") and len(set(out)) == len(out) and set(out) <= set(KNOWN_AXES):
            meta["axes"] = out
    return meta


def _need_distributed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise InputError("--workers and --scheduler need dask.distributed, which is not "
                         "installed: pip install 'napari-sam3-onnx[cluster]'.") from None


def _record(args: argparse.Namespace, store: Path | None, unit: str = "slice") -> RunRecord:
    record = getattr(args, "record", None) or RunRecord()
    record.store, record.unit = store, unit
    return record


def _counted_store(bundle: api.Bundle, record: RunRecord, path: Path | None):
    """The store opened for ``bundle``, counting the entries this run completes in ``record``."""
    if path is None:
        return None
    store = bundle.open_store(path)
    record.stored_since_open = lambda: store.writes  # counted once an entry is complete
    return store


def _stream(view_shape, results, n_lead):
    """Label planes in C order: the searched ones from ``results``, zeros elsewhere."""
    pending = next(results, None)
    for index in np.ndindex(*view_shape[:n_lead]):
        if pending is not None and tuple(pending[0]) == tuple(index):
            yield pending[1].labels
            pending = next(results, None)
        else:
            yield np.zeros(view_shape[n_lead:n_lead + 2], np.int32)


def _outputs(args: argparse.Namespace, path: Path, extra=()) -> None:
    """Check --out/--table before any work (see :mod:`.guard`) and note them as pending."""
    outputs = [("--out", check_labels_path(args.out)), ("--table", args.table)]
    side = [("--out's provenance", sidecar(args.out))] if args.out.suffix.lower() == ".npy" \
        else []  # the record of a .npy output goes beside it
    protected = [("input image", path), ("embedding store", args.store), *extra,
                 *bundle_paths(args.bundle)]
    check_outputs(outputs + side, protected, args.overwrite)
    _record(args, args.store).outputs(*outputs)


@dataclass
class LabelsRun:
    """What a command writing a labels stack (text, segment-all) has checked and opened."""

    path: Path
    job: StackJob
    view: Any
    bundle: api.Bundle
    record: RunRecord
    store: Any

    @property
    def n_lead(self) -> int:
        """Leading (slice) axes of the view."""
        return self.view.ndim - (3 if self.job.rgb else 2)

    def workspace(self, tile: int | None) -> Workspace:
        """The bundle over the run's store, no memory cache (each plane is read once)."""
        return self.bundle.workspace(self.store, EmbeddingCache(budget_bytes=0), as_tiling(tile))

    def refs(self) -> list[SliceRef]:
        """The selected planes of the input, in order (read lazily)."""
        return self.job.refs(self.view)


def open_labels_run(args: argparse.Namespace, command: str, need: Capability,
                    check: Callable[[api.Bundle], object] | None = None) -> LabelsRun:
    """Check the outputs and the store, open the input and the bundle: all before any work.

    ``check(bundle)`` runs before the store is opened (so a refusal leaves no store behind).
    """
    path = _one_input(args, command)
    _outputs(args, path)
    if args.store is not None:
        check_store(args.store, [("input image", path), *bundle_paths(args.bundle)])
    job = _job(args, path, image_names([path])[0])
    view = job.view()
    bundle = _bundle(args)
    bundle.adapter.require(need)
    if check is not None:
        check(bundle)
    record = _record(args, args.store, "tile" if args.tile else "slice")
    store = _counted_store(bundle, record, args.store)
    return LabelsRun(path, claim_names(store, [job])[0], view, bundle, record, store)


def write_labels_run(run: LabelsRun, args: argparse.Namespace, results: Iterator, bar: Bar,
                     columns: list[str], rows: list[dict],
                     provenance: Provenance | None = None) -> None:
    """Stream ``results`` (``(index, result)`` pairs) into --out, then ``rows`` into --table.

    ``provenance`` (:mod:`..api.provenance`) is written with the labels.
    """
    shape = run.view.shape[:-1] if run.job.rgb else run.view.shape
    try:
        write_labels(args.out, shape, _stream(shape, results, run.n_lead),
                     replace=args.overwrite, provenance=provenance,
                     **_labels_metadata(args, run.path, run.view.ndim))
    finally:
        bar.close()
    run.record.done("--out", args.out)
    if args.table is not None:
        write_table(args.table, columns, rows, replace=args.overwrite)
        run.record.done("--table", args.table)


@contextmanager
def scratch_labels(near: Path, shape: Sequence[int], dtype=np.int32):
    """A zeroed ``.npy`` memmap of ``shape`` in a temporary folder beside ``near``, removed after.

    For runs that write their planes out of order (propagation walks both ways from its seeds):
    the labels live on disk while the run fills them, so no command holds a whole labels stack
    in memory, and :func:`~napari_sam3_onnx.api.labels_files.write_labels` then streams them
    to ``--out`` plane by plane.
    The folder sits beside the output (same file system, not a memory-backed ``/tmp``) and has
    a name of its own; nothing the user named is touched.
    """
    # a file still mapped cannot be removed on Windows: the folder is then left, never an error
    with tempfile.TemporaryDirectory(prefix=".sam3-scratch-", dir=Path(near).parent,
                                     ignore_cleanup_errors=True) as tmp:
        labels = np.lib.format.open_memmap(Path(tmp) / "labels.npy", mode="w+", dtype=dtype,
                                           shape=tuple(int(n) for n in shape))
        try:
            yield labels
        finally:
            del labels
