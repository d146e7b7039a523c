"""Benchmark the plugin's paths against the raw ONNX calls they make; print a table, write JSON.

Usage::

    python benchmarks/run.py                 # FULL-geometry test graphs, every case (+ GUI)
    python benchmarks/run.py --quick --no-gui  # seconds; what CI runs to keep this working
    python benchmarks/run.py --bundle ~/sam3/hf-tracker --only-bundles --no-gui
    python benchmarks/run.py --providers --no-gui  # CPU and every installed device provider
    python benchmarks/run.py --no-gui --cases text-cold,tiling,propagate-tab  # docs' figures

Every timing is a ratio to a baseline measured in the same run, interleaved repetition by
repetition (see ``benchmarks/timing.py``); ``docs/performance.md`` explains the cases.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the ``benchmarks`` package importable
    sys.path.insert(0, str(ROOT))

from benchmarks import (  # noqa: E402
    cases_engine,
    cases_memory,
    cases_propagate_tab,
    cases_text_cold,
    cases_tiling,
)
from benchmarks.bundles import (  # noqa: E402
    build_test_bundles,
    make_stack,
    open_one,
    provider_sweep,
)
from benchmarks.report import Row, environment, table, write_json  # noqa: E402
from napari_sam3_onnx.models.base import Capability  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
#: Every case a run reports (the quick test checks they are all there).
CASES = ("encode", "memory/plane", "click-engine", "text-stack", "propagation",
         "propagation-memory", "click-gui", "responsiveness")
#: Layouts whose test graphs the stack cases run on: text on every concept layout but v0.3
#: (v0.6's graphs plus a point decoder), propagation on both memory layouts and one carry-over.
TEXT_LAYOUTS = ("wkentaro-v0.6", "samexporter-0.5", "autognosi-int8", "comicapp-sam3.1",
                "hf-sam3", "hf-sam3-student")
PROPAGATION_LAYOUTS = ("pagarcia-tracker", "jax-video", "hf-tracker", "hf-sam3",
                       "hf-sam3-student")
MEMORY_LAYOUT = "pagarcia-tracker"
#: Cases that build their own test graphs and give the user guides' figures; run only when
#: named in ``--cases`` (docs/text-prompts.md, docs/large-images.md, docs/propagation.md).
DOC_CASES = ("text-cold", "tiling", "propagate-tab")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="small geometry, few repetitions (seconds); asserts nothing about speed")
    p.add_argument("--bundle", action="append", type=Path, default=[], metavar="PATH",
                   help="a real or exported bundle folder to benchmark too (repeatable)")
    p.add_argument("--only-bundles", action="store_true",
                   help="skip the test graphs (benchmark only the --bundle folders)")
    p.add_argument("--providers", action="store_true",
                   help="sweep the CPU and every installed device execution provider")
    p.add_argument("--no-gui", action="store_true", help="skip the cases needing a display")
    p.add_argument("--reps", type=int, help="repetitions of the per-plane cases")
    p.add_argument("--stack-reps", type=int, help="repetitions of the stack cases")
    p.add_argument("--slices", type=int, help="N, the planes of the stack cases")
    p.add_argument("--shape", type=int, nargs=2, metavar=("ROWS", "COLS"),
                   help="plane size of the synthetic uint16 stack")
    p.add_argument("--threads", type=int, default=0,
                   help="onnxruntime intra-op threads (0: onnxruntime decides, as the plugin)")
    p.add_argument("--cases", default=",".join(CASES),
                   help="comma-separated cases to run (default: all but "
                        f"{', '.join(DOC_CASES)}; encode always runs with the others, which "
                        "need its embedding). On a full-depth bundle each encode is "
                        "~50 s here: 'encode,click-engine' at --reps 1 took 3.5 minutes "
                        "(docs/performance.md)")
    p.add_argument("--json", type=Path, help=f"write here instead of {RESULTS}/<host>-<date>")
    p.add_argument("--markdown", type=Path, help="also write the table as markdown here")
    args = p.parse_args(argv)
    named = {c for c in args.cases.split(",") if c}
    args.cases = sorted(named if named and named <= set(DOC_CASES) else named | {"encode"})
    if unknown := set(args.cases) - set(CASES) - set(DOC_CASES):
        p.error(f"unknown --cases {sorted(unknown)}; choose from "
                f"{', '.join(CASES + DOC_CASES)}")
    quick = args.quick
    args.geometry = "small" if quick else "full"
    args.reps = args.reps or (3 if quick else 15)
    args.stack_reps = args.stack_reps or (2 if quick else 5)
    args.slices = args.slices or (3 if quick else 8)
    args.shape = tuple(args.shape or ((60, 90) if quick else (1024, 1024)))
    return args


def engine_rows(bundle, stack, args, first_provider: bool, bundle_reps: bool,
                emit=None) -> list[Row]:
    """Every engine case on one opened bundle; ``emit(row)`` is called as each is measured."""
    reps = min(args.reps, 3) if bundle_reps else args.reps
    stack_reps = min(args.stack_reps, 2) if bundle_reps else args.stack_reps
    n = args.slices
    rows: list[Row] = []

    def add(row: Row | None) -> None:
        if row is None:
            return
        rows.append(row)
        if emit is not None:
            emit(row)

    def step(case: str) -> None:
        if emit is not None:
            print(f"  ... {case} on {bundle.name}", flush=True)

    step("encode")
    enc_row, emb = cases_engine.encode(bundle, stack, reps)
    add(enc_row)
    wanted = set(getattr(args, "cases", CASES))
    if first_provider and "memory/plane" in wanted:
        step("memory/plane")
        add(cases_memory.memory_row(bundle, emb))
    if "click-engine" in wanted:
        step("click-engine")
        add(cases_engine.click_engine(bundle, stack, emb, reps))
    if "text-stack" in wanted and (not bundle.test_graphs or bundle.name in TEXT_LAYOUTS):
        step("text-stack")
        if (row := cases_engine.text_stack(bundle, stack, n, stack_reps)) is not None:
            add(row)
        elif bundle.adapter.has(Capability.TEXT):
            add(Row("text-stack", bundle.name, status="skipped",
                    note="no tokenizer file (bpe_simple_vocab_16e6.txt.gz, "
                         "tokenizer.json or merges.txt) in the bundle folder"))
    if "propagation" in wanted and (not bundle.test_graphs
                                    or bundle.name in PROPAGATION_LAYOUTS):
        step("propagation")
        add(cases_engine.propagation(bundle, stack, n, stack_reps))
    if "propagation-memory" in wanted and (not bundle.test_graphs
                                           or bundle.name == MEMORY_LAYOUT):
        step("propagation-memory")
        add(cases_engine.propagation_memory(bundle, stack, n))
    return rows


def gui_rows(args, bundles: list[Path]) -> list[Row]:
    """Run the GUI cases in a child process (under ``xvfb-run`` when there is no display)."""
    cmd = [sys.executable, "-m", "benchmarks.cases_gui", "--geometry", args.geometry,
           "--reps", str(args.reps), "--shape", *map(str, args.shape)]
    if args.only_bundles:
        cmd.append("--only-bundles")
    for b in bundles:
        cmd += ["--bundle", str(b)]
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        if shutil.which("xvfb-run") is None:
            return [Row(c, "-", status="skipped", note="no display and no xvfb-run")
                    for c in ("click-gui", "responsiveness")]
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", *cmd]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gui.json"
        proc = subprocess.run([*cmd, "--json", str(out)], cwd=ROOT, capture_output=True,
                              text=True, timeout=900)
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            return [Row(c, "-", status="error", note=f"GUI run failed: {tail[0][:120]}")
                    for c in ("click-gui", "responsiveness")]
        return [Row(**r) for r in json.loads(out.read_text())]


def doc_rows(args, root: Path, t0: float) -> list[Row]:
    """The :data:`DOC_CASES` named in ``--cases`` (quick: small sizes, seconds)."""
    runs = {"text-cold": lambda: cases_text_cold.rows(root, 2 if args.quick else 24,
                                                      args.quick),
            "tiling": lambda: cases_tiling.rows(root, args.quick),
            "propagate-tab": lambda: cases_propagate_tab.rows(root, args.quick)}
    out: list[Row] = []
    for case in DOC_CASES:
        if case in args.cases:
            print(f"[{time.perf_counter() - t0:6.0f} s] {case}", flush=True)
            out += runs[case]()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the cases, print the table, write the JSON (and markdown); returns the exit code."""
    args = parse(argv)
    t0 = time.perf_counter()
    n_planes = max(2 * args.slices, 2)
    stack = make_stack(n_planes, args.shape)
    rows: list[Row] = []
    argd = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    json_path = args.json or RESULTS / (
        f"{environment()['host']}-{time.strftime('%Y%m%d-%H%M%S')}.json")

    def emit(row: Row) -> None:
        """Print the row as soon as it is measured; rewrite the JSON (a killed run keeps it)."""
        rows.append(row)
        print(f"[{time.perf_counter() - t0:6.0f} s] " + table([row]).splitlines()[-1],
              flush=True)
        write_json(rows, {**argd, "complete": False}, RESULTS, json_path)

    with tempfile.TemporaryDirectory(prefix="sam3-bench-") as tmp:
        folders: list[tuple[str, Path, bool]] = []
        if "encode" not in args.cases:  # only the docs' cases: no bundle to encode on
            pass
        elif not args.only_bundles:
            built = build_test_bundles(Path(tmp), args.geometry)
            folders += [(name, folder, True) for name, folder in built.items()]
        if "encode" in args.cases:
            folders += [(b.name, b.resolve(), False) for b in args.bundle]
        providers = list(provider_sweep(args.providers))
        total = len(providers) * len(folders)
        for i, provider in enumerate(providers):
            for j, (name, folder, test) in enumerate(folders):
                print(f"[{time.perf_counter() - t0:6.0f} s] bundle {i * len(folders) + j + 1}"
                      f"/{total}: {name} ({provider})", flush=True)
                bundle = open_one(name, folder, provider, args.geometry if test else "real",
                                  test, args.threads)
                try:
                    engine_rows(bundle, stack, args, i == 0, bundle_reps=not test, emit=emit)
                finally:
                    bundle.adapter.close()
        for row in doc_rows(args, Path(tmp), t0):
            emit(row)
        if not args.no_gui and {"click-gui", "responsiveness"} & set(args.cases):
            print(f"[{time.perf_counter() - t0:6.0f} s] GUI cases (child process)", flush=True)
            for row in gui_rows(args, [b.resolve() for b in args.bundle]):
                emit(row)
    elapsed = time.perf_counter() - t0
    env = environment()
    load = env["loadavg_1_5_15"]
    head = (f"{env['host']}: {env['cpus']} CPUs ({env['processor']}, load at the end "
            f"{load[0] if load else '?'}), onnxruntime "
            f"{env['onnxruntime']}, geometry {args.geometry}, plane {args.shape[0]}x"
            f"{args.shape[1]} uint16, N={args.slices}, {args.reps}/{args.stack_reps} reps")
    print(head)
    print(table(rows))
    path = write_json(rows, {**argd, "complete": True}, RESULTS, json_path)
    if args.markdown is not None:
        args.markdown.write_text(f"{head}\n\n{table(rows, markdown=True)}\n")
    print(f"\n{len(rows)} rows in {elapsed:.1f} s; JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
