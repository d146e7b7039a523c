"""Precompute throughput (one process vs 1 and 2 local dask workers) and store size per slice.

Runs on the checkable test graphs (``napari_sam3_onnx.testing``: the onnx-community tracker
layout with real names and the small or the full SAM 3 geometry, toy arithmetic), on the
synthetic nuclei stack saved as a TIFF, through the same code path as
``napari-sam3-onnx precompute``. The numbers measure this project's overhead (reading planes,
contrast mapping, encoder call, zarr writes, task scheduling), not SAM 3's encoder, which takes
16-21 s per slice on 2 CPU threads (docs/performance.md) and dwarfs all of it.

    python benchmarks/cli_throughput.py --slices 24 --geometry small full
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile

from napari_sam3_onnx import api
from napari_sam3_onnx.api import cluster
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei
from napari_sam3_onnx.testing.geometry import FULL, SMALL
from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

#: The real onnx-community tracker's embeddings per slice (docs/layouts.md#hf-tracker).
REAL_HF_TRACKER = {"image_embeddings.0": (1, 32, 288, 288), "image_embeddings.1": (1, 64, 144, 144),
                   "image_embeddings.2": (1, 256, 72, 72)}


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_once(bundle, tif: Path, store: Path, window, precision: str, client=None) -> float:
    start = time.perf_counter()
    report = api.precompute(bundle, tif, store, window=window, precision=precision,
                            client=client)
    elapsed = time.perf_counter() - start
    assert report.encoded == report.total, report
    return elapsed


def bench(geometry_name: str, n: int, root: Path) -> list[str]:
    geometry = {"small": SMALL, "full": FULL}[geometry_name]
    folder = build_hf_tracker(root / f"hf-{geometry_name}", geometry)
    image, _ = synthetic_nuclei((n, 180, 240))
    tif = root / f"nuclei-{n}.tif"
    tifffile.imwrite(tif, image, photometric="minisblack")
    window = tuple(float(v) for v in np.percentile(image, [0.5, 99.8]))
    bundle = api.open_bundle(folder, threads=1)
    bundle.adapter.encode(np.zeros((8, 8, 3), np.uint8))  # load the session before timing
    rows = []
    t = run_once(bundle, tif, root / f"{geometry_name}-local.zarr", window, "fp32")
    rows.append(("1 process (no dask)", "-", t))
    for workers in (1, 2):
        start = time.perf_counter()
        client = cluster.make_client(workers=workers, processes=True)
        startup = time.perf_counter() - start
        try:
            t = run_once(bundle, tif, root / f"{geometry_name}-w{workers}.zarr", window, "fp32",
                         client)
        finally:
            cluster.close_client(client)
        rows.append((f"LocalCluster, {workers} worker process(es)", f"{startup:.1f}", t))
    sizes = {}
    for precision in ("fp32", "fp16"):
        store = root / f"{geometry_name}-{precision}.zarr"
        run_once(bundle, tif, store, window, precision)
        sizes[precision] = du(store) / n
    size = geometry.input_size
    lines = [f"### {geometry_name} geometry ({size} x {size} input), {n} slices of 180 x 240 "
             "uint16", "", "| run | cluster start (s) | precompute (s) | slices/s |",
             "|---|---|---|---|"]
    lines += [f"| {name} | {startup} | {t:.2f} | {n / t:.1f} |" for name, startup, t in rows]
    lines += ["", f"On disk per slice: fp32 {sizes['fp32'] / 1e3:.1f} kB, fp16 "
              f"{sizes['fp16'] / 1e3:.1f} kB (ratio {sizes['fp16'] / sizes['fp32']:.2f}), "
              "zarr metadata and zstd included.", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slices", type=int, default=24)
    parser.add_argument("--geometry", nargs="+", default=["small", "full"],
                        choices=["small", "full"])
    args = parser.parse_args()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.geometry:
            lines += bench(name, args.slices, Path(tmp))
    raw = sum(int(np.prod(s)) for s in REAL_HF_TRACKER.values())
    lines.append(f"Real hf-tracker embeddings (computed, not measured): {raw * 4 / 1e6:.1f} MB "
                 f"per slice in fp32, {raw * 2 / 1e6:.1f} MB in fp16, before compression.")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
