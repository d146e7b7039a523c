"""Case ``propagate-tab``: what the Propagate tab costs on the SAM 3-sized memory test graphs.

Run with ``python benchmarks/run.py --no-gui --cases propagate-tab`` (figures in
docs/propagation.md; no display: the tab's writer works on a napari Labels layer without a
viewer). For pagarcia and jax-video graphs built at SAM 3's geometry (1008 input, 288 masks,
72 grid, few channels: :data:`~napari_sam3_onnx.testing.memory.MEMORY_FULL`) and stacks of 20
and 40 slices, each in a fresh process (``python -m benchmarks.cases_propagate_tab FOLDER N``):

* encode ms per slice (every slice encoded once into an empty cache);
* propagate ms per slice with every embedding cached: tracking plus the tab's writes into the
  Labels layer and its one-undo-step finish (what the tab adds on top of encoding), and the
  writes alone (best of two runs each);
* encoder calls per slice of a cold run (encode + track, as the tab runs it);
* peak Python allocations of the cold run (tracemalloc) and the process's peak RSS.

The test graphs compute toy functions on few channels: times are the engine's and the tab's
overhead against a 1008-px encoder, not SAM 3's cost, and memory excludes SAM 3's 21 MB
embeddings and ~34 MB-per-object banks (see docs/propagation.md).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a module from elsewhere: make ``benchmarks`` importable
    sys.path.insert(0, str(ROOT))

from benchmarks.report import Row  # noqa: E402

CASE = "propagate-tab"
SHAPE = (256, 320)


def stack(n: int) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """``(n, 256, 320)`` uint16 with a disc drifting across, and its centres."""
    rr, cc = np.mgrid[: SHAPE[0], : SHAPE[1]]
    data = np.zeros((n, *SHAPE), np.uint16)
    centres = [(80 + 60 * z / max(n - 1, 1), 60 + 180 * z / max(n - 1, 1)) for z in range(n)]
    for z, (r, c) in enumerate(centres):
        data[z][(rr - r) ** 2 + (cc - c) ** 2 <= 24**2] = 3000
    return data, centres


def one(folder: str, n: int) -> dict:
    """Measure one bundle and stack length (run in its own process)."""
    from napari.layers import Labels

    from napari_sam3_onnx._napari.propagate.writer import RunWriter
    from napari_sam3_onnx.engine.encoding import SliceEncoder, refs_along_axis
    from napari_sam3_onnx.engine.tracking.propagation import Seed, propagate
    from napari_sam3_onnx.models.bundle import open_adapter

    adapter = open_adapter(Path(folder))
    data, centres = stack(n)
    refs = refs_along_axis(data, window=(0.0, 3000.0), source="m")[:n]
    seed = {1: Seed.clicks(n // 2, [centres[n // 2]])}
    SliceEncoder(adapter).embed_many(refs[:2])  # warm-up: sessions load lazily

    def run(encoder: SliceEncoder) -> tuple[float, float, object]:
        layer = Labels(np.zeros(data.shape, np.int32))
        writer, spent = RunWriter(layer, 0, (), overwrite=False), [0.0]

        def write(k, outputs) -> None:
            t = time.perf_counter()
            writer.write(k, outputs)
            spent[0] += time.perf_counter() - t

        t0 = time.perf_counter()
        res = propagate(adapter, encoder, refs, seed, on_slice=write, keep_outputs=False)
        t = time.perf_counter()
        writer.finish()
        spent[0] += time.perf_counter() - t
        return time.perf_counter() - t0, spent[0], res

    encode = track = write = np.inf
    for _ in range(2):  # best of two: the machine may be shared
        warm = SliceEncoder(adapter)
        t0 = time.perf_counter()
        warm.embed_many(refs)
        encode = min(encode, (time.perf_counter() - t0) / n)
        total, spent, _ = run(warm)
        track, write = min(track, total / n), min(write, spent / n)
    tracemalloc.start()
    cold = SliceEncoder(adapter)
    _, _, res = run(cold)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    bank = next(iter(res.banks.values()), None)
    return {"n": n, "encode_ms": 1e3 * encode, "track_ms": 1e3 * track,
            "write_ms": 1e3 * write,
            "calls_per_slice": res.encoder_calls / n, "traced_mb": traced / 1e6,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
            "bank_peak_mb": 0.0 if bank is None else bank.peak_nbytes / 1e6,
            "method": res.method}


def rows(root: Path, quick: bool) -> list[Row]:
    """Both bundles, each length in a fresh process; ``value`` is propagate + write per slice
    over encode per slice, ``extra`` every figure of :func:`one`."""
    from napari_sam3_onnx.testing.jax_video import build_jax_video
    from napari_sam3_onnx.testing.memory import MEMORY_FULL
    from napari_sam3_onnx.testing.pagarcia import build_pagarcia

    out = []
    for name, build in (("pagarcia", build_pagarcia), ("jax-video", build_jax_video)):
        folder = build(root / f"propagate-tab-{name}",
                       **({} if quick else {"geometry": MEMORY_FULL}))
        for n in (4,) if quick else (20, 40):
            proc = subprocess.run([sys.executable, "-m", "benchmarks.cases_propagate_tab",
                                   str(folder), str(n)], cwd=ROOT, check=True,
                                  capture_output=True, text=True)
            m = json.loads(proc.stdout.strip().splitlines()[-1])
            out.append(Row(CASE, name, geometry="small" if quick else "memory-full",
                           value=m["track_ms"] / m["encode_ms"], unit="x encode",
                           note=f"n={n} ({m['method']}): propagate+write "
                                f"{m['track_ms']:.1f} ms/slice, writes {m['write_ms']:.1f}",
                           extra=m))
    return out


if __name__ == "__main__":
    print(json.dumps(one(sys.argv[1], int(sys.argv[2]))))
