"""Raw image-encoder sessions of two or more bundles, timed interleaved in one run.

Usage::

    python benchmarks/encoder.py FP32_BUNDLE INT8_BUNDLE [FP16_BUNDLE ...] --reps 5 \\
        --threads 2 --json encoder.json

Each bundle's ``image_encoder`` runs in its **own fresh process** (a worker holding one
onnxruntime session, CPU arena off, ``--threads`` intra-op threads): its peak RSS is that
variant's alone (load + encode), nothing another variant allocated. The parent drives the
workers round-robin on the same ``[1, 3, S, S]`` input, rotating the order every repetition, so
load from other processes hits every variant alike; it reports per-variant median seconds and
the median and IQR of the per-repetition ratios to the first bundle. Every row is printed as
it is measured and the JSON is rewritten after each one (a killed run keeps what it measured).

The workers live side by side (their memory adds up); ``--one-at-a-time`` measures each variant
in turn instead (no interleaving; for a machine that cannot hold them all).

A bundle may name the runtime after ``@``: ``BUNDLE@ort`` (onnxruntime's CPU provider, the
default), ``BUNDLE@ov-f32`` or ``BUNDLE@ov-bf16`` (OpenVINO's CPU runtime at that inference
precision, through the plugin's own :class:`~napari_sam3_onnx.models.openvino_runtime.
OpenVinoSession`; needs ``openvino``), so one run can put the same graph on both runtimes side by
side; ``BUNDLE@ort-lowmem`` is onnxruntime with its memory-pattern planning off too (the arena is
off for every variant), for the peak. ``BUNDLE@ort:clicks`` (any backend, any workflow of
``models/workflow_precision.py``) runs the graph a per-workflow bundle grants that workflow, so
its int8 and fp32 encoders go side by side in one run. ``--compare`` saves each variant's
outputs of its first run and reports their largest relative error (``max |a - b| / max |b|``)
and lowest cosine against the first variant's. The run starts by printing the CPU's model and
flags (VNNI, bf16) and each bundle's precision and int8 weight format (its ``manifest.json``).

``--graph memory_attention`` times that graph instead, at the memory bank's full size by
default (``--memories 7 --pointers 16``: SAM 3's ``num_maskmem`` spatial memories - one
conditioning slice at row 6 and six recent ones at rows 0-5 - and ``max_obj_ptrs`` object
pointers, the conditioning one plus 15 recent, as ``engine/tracking/memory_bank.py`` selects
them once a propagation is 16 slices in). ``--graph language_encoder`` loads the text encoder
alone (its load time and memory) and encodes one short phrase.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def memory_attention_feed(shapes: dict[str, list], memories: int, pointers: int,
                          max_obj_ptrs: int = 16, num_maskmem: int = 7
                          ) -> dict[str, np.ndarray]:
    """Seeded inputs of ``memory_attention`` for ``memories`` spatial memories and ``pointers``.

    ``shapes``: each input's shape as the graph declares it (the dynamic memory and pointer
    axes are set here; SAM 3: ``trk_feat_2 [1,256,72,72]``, ``memory_feats [M,64,72,72]``,
    ``pointers [P,256]``). Rows and pointer positions as the engine's memory bank makes them
    for a propagation past ``max_obj_ptrs`` slices: the conditioning memory at row
    ``num_maskmem - 1``, the recent ones at rows ``0 .. memories - 2``; pointer distances
    ``max_obj_ptrs - 1`` (the conditioning slice) then ``1 .. pointers - 1``, divided by
    ``max_obj_ptrs - 1``.
    """
    rng = np.random.default_rng(1)

    def normal(name: str, first: int) -> np.ndarray:
        return rng.normal(0, 1, [first, *shapes[name][1:]]).astype(np.float32)

    dist = ([max_obj_ptrs - 1, *list(range(1, pointers))])[:pointers]
    return {"trk_feat_2": normal("trk_feat_2", 1),
            "memory_feats": normal("memory_feats", memories),
            "memory_rows": np.asarray([num_maskmem - 1, *list(range(memories - 1))], np.int64),
            "pointers": normal("pointers", pointers),
            "pointer_tpos": np.asarray(dist, np.float32) / (max_obj_ptrs - 1)}


BACKENDS = ("ort", "ort-lowmem", "ov-f32", "ov-bf16")


def parse_variant(text: str) -> tuple[Path, str]:
    """``"BUNDLE@ov-bf16"`` -> ``(Path("BUNDLE"), "ov-bf16")``; no ``@``: onnxruntime.

    ``BUNDLE@ort:clicks`` runs the graph a per-workflow bundle grants that workflow
    (``workflow_precision`` in its manifest) instead of its default (fp32) one.
    """
    folder, at, spec = text.rpartition("@")
    if not at or spec.partition(":")[0] not in BACKENDS:
        return Path(text), "ort"
    return Path(folder), spec


def graph_file(bundle: Path, graph: str, workflow: str = "") -> str:
    """The file of ``graph`` in ``bundle``: its manifest's, or the one granted ``workflow``."""
    manifest = bundle / "manifest.json"
    name = f"{graph}.onnx"
    if manifest.is_file():
        name = json.loads(manifest.read_text()).get("graphs", {}).get(graph, name)
    if workflow:
        from napari_sam3_onnx.models.workflow_precision import WORKFLOW_OF, read_plan

        plan = read_plan(bundle)
        if plan is None:
            raise SystemExit(f"{bundle} is not a per-workflow bundle: drop ':{workflow}'")
        need = next(n for n, w in WORKFLOW_OF.items() if w == workflow)
        name = plan.file_for(need, graph) or name
    return name


def bundle_format(bundle: Path) -> str:
    """``"fp32"`` or ``"int8 (s8 weights)"`` from the bundle's manifest (``"?"`` without)."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
    except (OSError, ValueError):
        return "?"
    precision = str(manifest.get("precision", "?"))
    weights = (manifest.get("int8") or {}).get("weights")
    return f"{precision} ({weights} weights)" if weights and precision != "fp32" else precision


def _session(path: Path, threads: int, backend: str):
    """``(run(outputs, feed) -> list, input infos, output names)`` for one backend."""
    from napari_sam3_onnx.models.graph_info import read_signature

    sig = read_signature(path)
    if backend in ("ort", "ort-lowmem"):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.enable_cpu_mem_arena = False
        if backend == "ort-lowmem":  # no pre-planned buffers either: each freed when done
            so.enable_mem_pattern = False
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    else:
        from napari_sam3_onnx.models.openvino_runtime import OpenVinoSession

        sess = OpenVinoSession(path, backend.split("-")[1], threads, cache_dir=None)
    return sess.run, sig.inputs, [o.name for o in sig.outputs]


def _feed(graph: str, inputs, memories: int, pointers: int) -> dict[str, np.ndarray]:
    if graph == "memory_attention":
        return memory_attention_feed({i.name: list(i.shape) for i in inputs}, memories, pointers)
    if graph == "language_encoder":
        tokens = np.zeros([d if isinstance(d, int) else 32 for d in inputs[0].shape], np.int64)
        tokens[0, :3] = (49406, 2271, 49407)  # CLIP start, "cell", end; 0-padded
        return {inputs[0].name: tokens}
    size = [d if isinstance(d, int) else 1 for d in inputs[0].shape]
    return {inputs[0].name: np.random.default_rng(0).uniform(-1, 1, size).astype(np.float32)}


def worker(bundle: Path, threads: int, graph: str = "image_encoder", memories: int = 7,
           pointers: int = 16, backend: str = "ort", dump: Path | None = None) -> None:
    """Child: load the graph, answer ``run`` lines with one timed run (JSON lines).

    ``dump``: where to save the outputs of the first run (``.npz``), for ``--compare``.
    """
    backend, _, workflow = backend.partition(":")
    name = graph_file(bundle, graph, workflow)
    t0 = time.perf_counter()
    run, inputs, outputs = _session(bundle / name, threads, backend)
    load = time.perf_counter() - t0
    feed = _feed(graph, inputs, memories, pointers)
    print(json.dumps({"ready": True, "load_s": load, "rss_after_load_mb": _rss_mb(),
                      "bytes_on_disk": sum(p.stat().st_size for p in bundle.iterdir()
                                           if p.is_file())}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        t0 = time.perf_counter()
        out = run(outputs, feed)
        dt = time.perf_counter() - t0
        if dump is not None:
            np.savez(dump, **dict(zip(outputs, out, strict=True)))
            dump = None
        print(json.dumps({"seconds": dt, "peak_mb": _peak_mb(),
                          "checksum": float(sum(np.abs(o).mean() for o in out))}), flush=True)


def compare_outputs(files: dict[str, Path]) -> dict[str, dict]:
    """Each variant's largest relative error and lowest cosine against the first's outputs."""
    names = list(files)
    with np.load(files[names[0]]) as ref:
        base = {k: ref[k].astype(np.float64) for k in ref.files}
    result = {}
    for name in names:
        with np.load(files[name]) as got:
            errs, cosines = [], []
            for key, want in base.items():
                have = got[key].astype(np.float64)
                errs.append(float(np.abs(have - want).max() / max(np.abs(want).max(), 1e-30)))
                denom = np.linalg.norm(have) * np.linalg.norm(want)
                cosines.append(float((have.ravel() @ want.ravel()) / denom) if denom else 1.0)
        result[name] = {"max_rel_error": max(errs), "min_cosine": min(cosines)}
    return result


class Worker:
    """A fresh process holding one bundle's encoder session."""

    def __init__(self, bundle: Path, threads: int, extra: tuple[str, ...] = (),
                 backend: str = "ort", dump: Path | None = None) -> None:
        self.bundle = bundle
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        more = ("--backend", backend, *(("--dump", str(dump)) if dump is not None else ()))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(bundle), "--threads", str(threads),
             *extra, *more],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.info = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker for {self.bundle} died (rc {self.proc.wait()})")
        return json.loads(line)

    def run(self) -> dict:
        """One timed encode in the worker."""
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        """End the worker."""
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def _quartiles(x) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(np.asarray(x, float), [25, 50, 75])
    return float(q1), float(q2), float(q3)


def summarise(times: dict[str, list[float]], infos: dict[str, dict], peaks: dict[str, float]
              ) -> list[dict]:
    """Per-variant rows: median seconds, ratio to the first variant (median, IQR), peak RSS."""
    names = list(times)
    base = times[names[0]]
    rows = []
    for name in names:
        n = min(len(base), len(times[name]))
        ratios = [times[name][i] / base[i] for i in range(n)] if n else []
        q = _quartiles(times[name]) if times[name] else (np.nan,) * 3
        rq = _quartiles(ratios) if ratios else (np.nan,) * 3
        rows.append({"bundle": name, "reps": len(times[name]), "median_s": q[1],
                     "iqr_s": [q[0], q[2]], "speedup_vs_first": 1 / rq[1] if rq[1] else None,
                     "ratio_to_first": rq[1], "ratio_iqr": [rq[0], rq[2]],
                     "peak_rss_gb": peaks.get(name, np.nan) / 1024,
                     "load_s": infos[name]["load_s"],
                     "bytes_on_disk": infos[name]["bytes_on_disk"]})
    return rows


def _print_rows(rows: list[dict]) -> None:
    print(f"{'bundle':<44} {'s/slice':>8} {'IQR':>15} {'x first':>7} {'ratio IQR':>13} "
          f"{'peak GB':>8} {'disk GB':>8} {'max rel err':>11} {'min cos':>9}")
    for r in rows:
        err = r.get("max_rel_error", float("nan"))
        cos = r.get("min_cosine", float("nan"))
        print(f"{r['bundle']:<44} {r['median_s']:8.2f} {r['iqr_s'][0]:7.2f}-{r['iqr_s'][1]:<7.2f}"
              f" {r['speedup_vs_first'] or float('nan'):7.2f} {r['ratio_iqr'][0]:6.3f}-"
              f"{r['ratio_iqr'][1]:<6.3f} {r['peak_rss_gb']:8.2f} {r['bytes_on_disk'] / 1e9:8.2f}"
              f" {err:11.2e} {cos:9.6f}")


def print_machine(variants: list[tuple[Path, str]]) -> dict:
    """Print (and return) the CPU's model and flags and each bundle's format."""
    from napari_sam3_onnx.models.cpu_features import best_int8_format, cpu_features

    cpu = cpu_features()
    print(f"CPU {cpu.summary()}; int8 format for it: {best_int8_format(cpu)}; "
          f"native bf16: {'yes' if cpu.bf16 else 'no'}", flush=True)
    formats = {f"{b}@{k}": bundle_format(b) for b, k in variants}
    for name, fmt in formats.items():
        print(f"  {name}: {fmt}", flush=True)
    return {"cpu": cpu.summary(), "vnni": cpu.vnni, "bf16": cpu.bf16, "formats": formats}


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved comparison; print rows as measured, rewrite the JSON each time."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundles", nargs="*", type=Path)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--one-at-a-time", action="store_true")
    p.add_argument("--graph", choices=("image_encoder", "memory_attention", "language_encoder"),
                   default="image_encoder")
    p.add_argument("--memories", type=int, default=7,
                   help="memory_attention: spatial memories (full bank: 7)")
    p.add_argument("--pointers", type=int, default=16,
                   help="memory_attention: object pointers (full bank: 16)")
    p.add_argument("--compare", action="store_true",
                   help="report each variant's output error against the first variant's")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="ort", help=argparse.SUPPRESS)
    p.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    extra = ("--graph", args.graph, "--memories", str(args.memories),
             "--pointers", str(args.pointers))
    if args.worker is not None:
        worker(args.worker, args.threads, args.graph, args.memories, args.pointers,
               args.backend, args.dump)
        return 0
    if len(args.bundles) < 1:
        p.error("name one or more bundle folders (the first is the baseline)")
    variants = [parse_variant(str(b)) for b in args.bundles]
    names = [str(b) for b in args.bundles]
    if len(set(names)) < len(names):
        p.error("a bundle and runtime is named twice")
    machine = print_machine(variants)
    dumps_dir = Path(tempfile.mkdtemp(prefix="encoder-outputs-")) if args.compare else None
    dumps = {n: dumps_dir / f"{i}.npz" for i, n in enumerate(names)} if dumps_dir else {}
    out = args.json or RESULTS / f"encoder-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {n: [] for n in names}
    peaks: dict[str, float] = {}
    infos: dict[str, dict] = {}
    log: list[dict] = []

    def save(done: bool) -> None:
        rows = summarise(times, infos, peaks) if len(infos) == len(names) else []
        for row in rows:
            row.update(errors.get(row["bundle"], {}))
        payload = {"graph": args.graph, "threads": args.threads, "reps": args.reps,
                   "machine": machine,
                   "loadavg": os.getloadavg(),
                   "complete": done, "measurements": log, "rows": rows}
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=2))
        tmp.replace(out)

    errors: dict[str, dict] = {}
    pairs = list(zip(names, variants, strict=True))
    groups = [[v] for v in pairs] if args.one_at_a_time else [pairs]
    for group in groups:
        workers = {}
        try:
            for b, (folder, backend) in group:
                workers[b] = w = Worker(folder, args.threads, extra, backend, dumps.get(b))
                infos[b] = w.info
                print(f"loaded {b} in {w.info['load_s']:.1f} s "
                      f"(RSS {w.info['rss_after_load_mb'] / 1024:.2f} GB)", flush=True)
            order = list(workers)
            for rep in range(args.reps):
                for name in order[rep % len(order):] + order[:rep % len(order)]:
                    r = workers[name].run()
                    times[name].append(r["seconds"])
                    peaks[name] = max(peaks.get(name, 0.0), r["peak_mb"])
                    log.append({"rep": rep, "bundle": name, **r, "loadavg_1": os.getloadavg()[0]})
                    print(f"rep {rep + 1}/{args.reps} {name}: {r['seconds']:.2f} s, "
                          f"peak {r['peak_mb'] / 1024:.2f} GB, load {os.getloadavg()[0]:.1f}",
                          flush=True)
                    save(False)
        finally:
            for w in workers.values():
                w.close()
    if dumps:
        errors = compare_outputs(dumps)
        for f in dumps.values():
            f.unlink(missing_ok=True)
        dumps_dir.rmdir()
    save(True)
    print(f"\nload average {os.getloadavg()}; {args.threads} threads; JSON: {out}")
    rows = summarise(times, infos, peaks)
    for row in rows:
        row.update(errors.get(row["bundle"], {}))
    _print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
