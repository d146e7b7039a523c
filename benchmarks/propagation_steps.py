"""Per-slice cost of a propagation through a bundle, split by graph, until the bank is full.

Usage::

    python benchmarks/propagation_steps.py BUNDLE [--slices 18] [--size 1024 1000] \\
        [--threads 2] [--json out.json]

One click on slice 0 of a drifting synthetic stack (bright disc, asymmetric ``(rows, cols)``
planes) is propagated forward through ``--slices`` slices with SAM 3's memory graphs
(``engine.tracking.propagation.iter_propagate``, cold cache, ``stop_after_absent`` off). Every
onnxruntime call is timed per graph file, so each slice's row gives its wall time and the
seconds spent in the image encoder, ``memory_attention``, the memory encoder and the prompt
decoder, with the bank it saw (memories and pointers). SAM 3's bank is full once the run is
``num_maskmem`` slices in (7 memories) and its pointers once it is ``max_obj_ptrs`` (16) in: the
rows after slice 16 are the per-slice cost at full bank. Rows are printed as they are measured
and the JSON is rewritten after each one.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np


def _stack(n: int, shape: tuple[int, int]) -> np.ndarray:
    """``(n, rows, cols)`` uint16 planes: a disc drifting down and right over a gradient."""
    rows, cols = shape
    rr, cc = np.mgrid[:rows, :cols]
    planes = []
    for z in range(n):
        r0, c0 = rows * 0.35 + 4.0 * z, cols * 0.4 + 6.0 * z
        disc = ((rr - r0) ** 2 + (cc - c0) ** 2) < (min(shape) * 0.08) ** 2
        planes.append((2000 + 3 * cc / cols * 1000 + 30000 * disc).astype(np.uint16))
    return np.stack(planes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", type=Path)
    p.add_argument("--slices", type=int, default=18)
    p.add_argument("--size", type=int, nargs=2, default=(1024, 1000), metavar=("ROWS", "COLS"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)

    import onnxruntime as ort

    from napari_sam3_onnx.engine.encoding import SliceEncoder, refs_along_axis
    from napari_sam3_onnx.engine.tracking.propagation import iter_propagate
    from napari_sam3_onnx.engine.tracking.types import Seed
    from napari_sam3_onnx.models.bundle import open_adapter
    from napari_sam3_onnx.models.runtime import RuntimeConfig

    spent: dict[str, float] = defaultdict(float)
    feeds: dict[str, dict] = {}
    real_run = ort.InferenceSession.run

    def timed_run(self, output_names, input_feed, *a, **kw):
        name = Path(getattr(self, "_model_path", "?") or "?").stem
        t0 = time.perf_counter()
        try:
            return real_run(self, output_names, input_feed, *a, **kw)
        finally:
            spent[name] += time.perf_counter() - t0
            if name == "memory_attention":
                feeds[name] = {k: tuple(np.shape(v)) for k, v in input_feed.items()}

    ort.InferenceSession.run = timed_run  # type: ignore[method-assign]
    t_load = time.perf_counter()
    adapter = open_adapter(args.bundle, RuntimeConfig(providers=("cpu",),
                                                     intra_op_threads=args.threads))
    load_s = time.perf_counter() - t_load
    stack = _stack(args.slices, tuple(args.size))
    refs = refs_along_axis(stack, source="probe")[:args.slices]
    rows, cols = args.size
    seed = {1: Seed.clicks(0, [(int(rows * 0.35), int(cols * 0.4))])}
    steps = iter_propagate(adapter, SliceEncoder(adapter), refs, seed, direction="forward",
                           stop_after_absent=None)
    out: dict = {"bundle": str(args.bundle), "slices": args.slices, "size": list(args.size),
                 "threads": args.threads, "load_s": round(load_s, 2), "rows": []}
    print(f"loaded {args.bundle} in {load_s:.1f} s; {args.slices} slices of {rows} x {cols}",
          flush=True)
    print(f"{'slice':>5} {'wall s':>8} {'encoder':>8} {'mem.att':>8} {'mem.enc':>8} "
          f"{'decoder':>8} {'bank (memories, pointers)':>26}", flush=True)
    while True:
        before, t0 = dict(spent), time.perf_counter()
        feeds.clear()
        try:
            step = next(steps)
        except StopIteration:
            break
        wall = time.perf_counter() - t0
        part = {k: round(spent[k] - before.get(k, 0.0), 3) for k in spent}
        shapes = feeds.get("memory_attention", {})
        bank = (shapes.get("memory_feats", (0,))[0], shapes.get("pointers", (0,))[0])
        row = {"slice": step.index, "seed": step.seed, "wall_s": round(wall, 3), "graphs_s": part,
               "memories": int(bank[0]), "pointers": int(bank[1])}
        out["rows"].append(row)
        print(f"{step.index:>5} {wall:>8.2f} {part.get('image_encoder', 0):>8.2f} "
              f"{part.get('memory_attention', 0):>8.2f} {part.get('memory_encoder', 0):>8.2f} "
              f"{part.get('prompt_decoder', 0):>8.2f} {bank!s:>26}", flush=True)
        if args.json is not None:
            out["peak_rss_gb"] = round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
            args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    full = [r for r in out["rows"] if r["memories"] >= 7 and r["pointers"] >= 16]
    if full:
        ma = [r["graphs_s"].get("memory_attention", 0.0) for r in full]
        wall = [r["wall_s"] for r in full]
        print(f"bank full on {len(full)} slice(s): wall {np.median(wall):.2f} s, "
              f"memory_attention {np.median(ma):.2f} s per slice (medians)", flush=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB",
          file=sys.stderr)
    adapter.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
