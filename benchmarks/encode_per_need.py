"""Encode time per workflow with Autognosi's two image encoders: whole vs one pass per need.

Usage::

    python benchmarks/encode_per_need.py [--reps 9] [--grid 72] [--channels 64]

Builds the toy Autognosi bundle (``napari_sam3_onnx.testing``) at ``14 * grid`` pixels and times,
interleaved repetition by repetition on the same image:

* ``before``: :meth:`encode` (both encoders, what every workflow paid);
* ``text`` / ``clicks``: :meth:`encode_for` with that workflow's need (one encoder);
* ``both``: ``encode_for(TEXT)`` then ``complete(..., CLICKS)`` (a plane used by both workflows);
* ``feed``: resizing and normalising the image alone (``both`` pays it twice, ``before`` once).

The toy encoders are not ViTs, so absolute times mean little; the ratios to ``before`` are what
a real bundle's two equally sized ViT passes would show (about 0.5 for one workflow, 1 for both)
once the image feed, which the toy encoders do not outweigh, is subtracted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from napari_sam3_onnx.models.adapters._common import encoder_feed
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.autognosi import build_autognosi
from napari_sam3_onnx.testing.geometry import TestGeometry


def main(argv: list[str] | None = None) -> int:
    """Print median seconds per workflow and their ratios to the whole encode."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--grid", type=int, default=72, help="feature grid (72: SAM 3's 1008 px)")
    p.add_argument("--channels", type=int, default=64, help="channels of each feature level")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        a = open_adapter(build_autognosi(Path(tmp), TestGeometry(args.grid, (args.channels,) * 3)))
        rng = np.random.default_rng(0)
        rgb = rng.integers(0, 255, (1040, 1392, 3), dtype=np.uint8)
        vision_input = a.sessions["vision_encoder"].signature.inputs[0]
        cases = {
            "before": lambda: a.encode(rgb),
            "text": lambda: a.encode_for(rgb, Capability.TEXT),
            "clicks": lambda: a.encode_for(rgb, Capability.CLICKS),
            "both": lambda: a.complete(a.encode_for(rgb, Capability.TEXT), rgb,
                                       Capability.CLICKS),
            "feed": lambda: encoder_feed(rgb, vision_input, a.layout, "vision_encoder"),
        }
        for fn in cases.values():  # warm-up: sessions load lazily
            fn()
        times: dict[str, list[float]] = {k: [] for k in cases}
        names = list(cases)
        for rep in range(args.reps):
            for name in names if rep % 2 else names[::-1]:
                t = time.perf_counter()
                cases[name]()
                times[name].append(time.perf_counter() - t)
        a.close()
    base = statistics.median(times["before"])
    print(f"Autognosi toy bundle, {14 * args.grid} px input, {args.channels} channels, "
          f"{args.reps} reps (median)")
    for name in names:
        med = statistics.median(times[name])
        print(f"  {name:<7} {med * 1000:8.1f} ms   ratio to before {med / base:5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
