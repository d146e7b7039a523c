"""Automatic segmentation of one encoded plane against that plane's encode, in one run.

Usage::

    python benchmarks/automatic_speed.py --bundle /path/to/nso-bundle --threads 2 \\
        --json benchmarks/results/automatic_speed.json
    python benchmarks/automatic_speed.py --bundle toy-nso --side 252   # seconds: smoke run

One run measures, on the same ``--side x --side`` plane (a deterministic image of bright blobs
of several sizes on a textured background) and the same sessions:

1. **encode**: the plane through the bundle's image encoder (``SliceEncoder.embed``);
2. **automatic**: ``segment_plane`` on that cached embedding with SAM's generator defaults
   (``--points-per-side`` x ``--points-per-side`` clicks, ``--points-per-batch`` per decoder
   call), split into the **decoder** (time inside ``predict_point_batch``) and our numpy
   post-processing (stability score, upsampling of kept candidates, NMS, label painting: the
   rest); the ratio automatic / encode is the figure to compare (absolute seconds on a shared
   machine are noisy; both sides share the load);
3. with ``--keep-all N``: the same on an ``N x N`` grid keeping every candidate the decoder
   calls present (thresholds -1): the post-processing's worst case (random weights keep none);
4. with ``--batches 1,8``: the decoder's seconds per click at each batch size on the same
   embedding, interleaved (each size once per repetition, order rotated);
5. with ``--before-after N``: N clicks decoded as before this benchmark's fixes (CPU arena off,
   all N in one call) and now, on the same embedding.

Every row is printed as it is measured and the JSON (``--json``) rewritten after each one. The
load average is printed with every row: compare runs only at similar load. ``toy-nso`` builds
this project's small nso-sam3 test graphs (numbers say nothing about SAM 3's cost).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(ROOT))

from napari_sam3_onnx import api  # noqa: E402
from napari_sam3_onnx.engine.automatic import AutoMaskSettings, generate, plane  # noqa: E402
from napari_sam3_onnx.engine.cache import EmbeddingCache  # noqa: E402
from napari_sam3_onnx.engine.encoding import SliceRef  # noqa: E402

#: Post-processing steps timed on their own (module, function name).
STEPS = ((generate, "stability_scores"), (generate, "upsample_crop"), (generate, "nms"),
         (plane, "paint"))


def blob_plane(side: int, seed: int = 0) -> np.ndarray:
    """``(side, side)`` uint8: ~side/12 bright discs of radii 4..side/25 on a noisy background."""
    rng = np.random.default_rng(seed)
    rr, cc = np.mgrid[:side, :side]
    img = rng.normal(40, 8, (side, side))
    for _ in range(max(side // 12, 4)):
        r0, c0 = rng.uniform(0, side, 2)
        rad = rng.uniform(4, max(side / 25, 5))
        img[(rr - r0) ** 2 + (cc - c0) ** 2 <= rad**2] = rng.uniform(150, 240)
    return np.clip(img, 0, 255).astype(np.uint8)


class Clock:
    """Seconds spent inside wrapped callables, by name (the wrapped call's own time)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn):
        depth = [0]  # a call made from inside the same wrapped callable is not counted twice

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
                    self.calls[name] = self.calls.get(name, 0) + 1
        return timed


@contextmanager
def timed_calls(clock: Clock, adapter):
    """Time the decoder (its ``predict_point_batch``) and each post-processing step."""
    saved = [(mod, name, getattr(mod, name)) for mod, name in STEPS]
    for mod, name, fn in saved:
        setattr(mod, name, clock.wrap(name, fn))
    decoder = adapter.prompt_decoder
    decoder.predict_point_batch = clock.wrap("decoder", decoder.predict_point_batch)
    try:
        yield clock
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
        del decoder.predict_point_batch  # the instance attribute; the method shows again


def open_bundle(spec: str, threads: int, workdir: Path) -> api.Bundle:
    """A bundle folder or id, or ``toy-nso`` (this project's small nso-sam3 test graphs)."""
    if spec == "toy-nso":
        from napari_sam3_onnx.testing.nso import build_nso

        return api.open_bundle(build_nso(workdir / "toy-nso"), threads=threads)
    return api.open_bundle(spec, threads=threads)


def batch_sweep(adapter, emb, sizes: list[int], reps: int, side_px: tuple[int, int], emit):
    """Decoder seconds per click at each batch size, interleaved over ``reps`` repetitions."""
    in_h, in_w = side_px
    rng = np.random.default_rng(1)
    per: dict[int, list[float]] = {b: [] for b in sizes}
    for rep in range(reps):
        order = sizes[rep % len(sizes):] + sizes[:rep % len(sizes)]
        for b in order:
            pts = (rng.uniform(0, 1, (max(b, 1), 2)) * [in_w, in_h]).astype(np.float32)
            t0 = time.perf_counter()
            adapter.prompt_decoder.predict_point_batch(emb, pts)
            per[b].append((time.perf_counter() - t0) / len(pts))
    for b in sizes:
        emit({"row": "decoder-batch", "batch": b, "s_per_click": float(np.median(per[b])),
              "all": [round(x, 4) for x in per[b]]})


def before_after(adapter, emb, n: int, side_px: tuple[int, int], emit) -> None:
    """``n`` clicks as the nso adapter decoded them before (arena off, all in one call) and now.

    Interleaved, one repetition each, on the same embedding and clicks (nso bundles only).
    """
    from napari_sam3_onnx.models.adapters import _nso_roles as nso
    from napari_sam3_onnx.models.runtime import LazySession

    decoder = adapter.prompt_decoder
    if not getattr(decoder, "batched", False):
        return
    in_h, in_w = side_px
    pts = (np.random.default_rng(2).uniform(0, 1, (n, 2)) * [in_w, in_h]).astype(np.float32)
    now, cap = decoder.session, nso.MAX_CLICKS_PER_CALL
    before = LazySession(now.path, replace(now.config, cpu_mem_arena=False))
    decoder.session = before
    decoder.predict_point_batch(emb, pts[:1])
    decoder.session = now
    seconds = {}
    for name, session, per_call in (("before", before, n), ("now", now, cap)):
        decoder.session, nso.MAX_CLICKS_PER_CALL = session, per_call
        t0 = time.perf_counter()
        decoder.predict_point_batch(emb, pts)
        seconds[name] = (time.perf_counter() - t0) / n
    decoder.session, nso.MAX_CLICKS_PER_CALL = now, cap
    emit({"row": "decoder-before-after", "clicks": n,
          "before_s_per_click (arena off, all clicks in one call)": seconds["before"],
          f"now_s_per_click (arena on, {cap} per call)": seconds["now"],
          "speed-up": seconds["before"] / seconds["now"]})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True, help="bundle folder or id, or toy-nso")
    p.add_argument("--side", type=int, default=1008, help="plane side in pixels (1008)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: ORT's choice)")
    p.add_argument("--points-per-side", type=int, default=32)
    p.add_argument("--points-per-batch", type=int, default=64)
    p.add_argument("--pred-iou-thresh", type=float, default=None,
                   help="override SAM's 0.88 (e.g. 0 to keep every candidate: worst-case "
                   "post-processing)")
    p.add_argument("--stability-score-thresh", type=float, default=None)
    p.add_argument("--batches", default="", help="comma-separated batch sizes to sweep")
    p.add_argument("--batch-reps", type=int, default=2)
    p.add_argument("--keep-all", type=int, default=0, metavar="N",
                   help="also segment the plane with an N x N grid keeping every candidate "
                   "(thresholds -1): the post-processing's worst case")
    p.add_argument("--before-after", type=int, default=0, metavar="N",
                   help="also time N clicks decoded as before the arena/batch-cap change")
    p.add_argument("--json", type=Path, help="write the rows here (rewritten after each)")
    args = p.parse_args(argv)

    rows: list[dict] = []

    def emit(row: dict) -> None:
        row["loadavg_1"] = round(os.getloadavg()[0], 2)
        row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                             "rows": rows}, indent=1))

    given = {"points_per_side": args.points_per_side, "points_per_batch": args.points_per_batch}
    if args.pred_iou_thresh is not None:
        given["pred_iou_thresh"] = args.pred_iou_thresh
    if args.stability_score_thresh is not None:
        given["stability_score_thresh"] = args.stability_score_thresh
    settings = AutoMaskSettings(**given)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = open_bundle(args.bundle, args.threads, Path(tmp))
        adapter = bundle.adapter
        img = blob_plane(args.side)
        ref = SliceRef(img[None], (0,), False, None, source="plane")
        encoder = bundle.encoder(None, EmbeddingCache())
        t0 = time.perf_counter()
        emb = encoder.embed(ref)
        t_encode = time.perf_counter() - t0
        emit({"row": "encode", "seconds": t_encode, "plane": [args.side, args.side],
              "input_size": list(adapter.input_size), "threads": args.threads,
              "batched_decoder": bool(getattr(adapter.prompt_decoder, "batched", False))})
        adapter.prompt_decoder.predict_point_batch(emb, np.zeros((1, 2), np.float32))  # warm

        runs = [("automatic", settings)]
        if args.keep_all:
            runs.append(("automatic-keep-all", replace(
                settings, points_per_side=args.keep_all, pred_iou_thresh=-1.0,
                stability_score_thresh=-1.0)))
        for name, run_settings in runs:
            clock = Clock()
            t0 = time.perf_counter()
            with timed_calls(clock, adapter):
                result = plane.segment_plane(adapter, encoder.embed, ref, run_settings)
            t_auto = time.perf_counter() - t0
            dec = clock.seconds.get("decoder", 0.0)
            clicks = run_settings.points_per_side ** 2
            emit({"row": name, "seconds": t_auto, "decoder_s": dec,
                  "decoder_share": dec / t_auto, "post_s": t_auto - dec,
                  "post_share": (t_auto - dec) / t_auto,
                  "post_steps_s": {k: round(v, 4) for k, v in clock.seconds.items()
                                   if k != "decoder"},
                  "calls": dict(clock.calls), "clicks": clicks,
                  "s_per_click_decoder": dec / clicks, "objects": len(result.instances),
                  "ratio_auto_over_encode": t_auto / t_encode,
                  "settings": {k: getattr(run_settings, k) for k in
                               (*given, "pred_iou_thresh", "stability_score_thresh")}})
        sizes = [int(b) for b in args.batches.split(",") if b.strip()]
        if sizes:
            batch_sweep(adapter, emb, sizes, args.batch_reps, adapter.input_size, emit)
        if args.before_after:
            before_after(adapter, emb, args.before_after, adapter.input_size, emit)
        bundle.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
