"""Engine cases (no display): encode, click, text over a stack, propagation, peak memory.

Each case first runs its plugin path once to load the sessions, records the ONNX calls of one
more run (:class:`~benchmarks.timing.Recorder`), then times the plugin path against a replay of
exactly those calls, interleaved.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np

from napari_sam3_onnx import api
from napari_sam3_onnx.api.text import iter_search_text
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.interactive import Prompt, segment
from napari_sam3_onnx.engine.tracking.types import Seed
from napari_sam3_onnx.models.base import Capability

from .bundles import Bundle, Stack, make_stack, open_one, used_provider
from .report import Row
from .timing import Recorder, interleaved

CONCEPT = "nucleus"


def _row(case: str, bundle: Bundle, timing, note: str = "", **extra) -> Row:
    return Row(case, bundle.name, used_provider(bundle), bundle.geometry, note=note,
               extra=extra, **timing.summary())


def encode(bundle: Bundle, stack: Stack, reps: int) -> tuple[Row, object]:
    """SliceEncoder.embed on a cold cache (plane -> window -> RGB -> resize -> session -> cache)
    over the encoder session(s) run on the feed the plugin made."""
    ref = SliceRef(stack.data, (0,), window=stack.window, source="bench-encode")
    enc = SliceEncoder(bundle.adapter)
    enc.embed(ref)  # loads the sessions
    enc.cache.clear()
    with Recorder() as rec:
        emb = enc.embed(ref)
    raw = rec.replay()
    raw()
    timing = interleaved(lambda: enc.embed(ref), raw, reps, before_plugin=enc.cache.clear)
    h, w = stack.data.shape[1:]
    row = _row("encode", bundle, timing, f"{h}x{w} uint16 plane -> {emb.input_size[0]} px",
               session_calls=rec.counts(), embedding_bytes=emb.nbytes)
    return row.judge(), emb


def click_engine(bundle: Bundle, stack: Stack, emb, reps: int) -> Row | None:
    """segment() of one click on an encoded plane over the prompt decoder's raw run."""
    if not bundle.adapter.has(Capability.CLICKS):
        return None
    prompt = Prompt.clicks([stack.centre(0)])
    segment(bundle.adapter, emb, prompt)
    with Recorder() as rec:
        res = segment(bundle.adapter, emb, prompt)
    raw = rec.replay()
    timing = interleaved(lambda: segment(bundle.adapter, emb, prompt), raw, reps)
    return _row("click-engine", bundle, timing, f"1 click, mask {int(res.mask.sum())} px",
                session_calls=rec.counts()).judge()


class _EncodeCount:
    """Counts the adapter's encodes while active (the API keeps its encoder to itself)."""

    def __init__(self, adapter) -> None:
        self.adapter, self.calls = adapter, 0

    def __enter__(self) -> _EncodeCount:
        inner = self.adapter.encode

        def counted(rgb):
            self.calls += 1
            return inner(rgb)

        self.adapter.encode = counted
        return self

    def __exit__(self, *exc) -> None:
        del self.adapter.encode  # the class's method again


def text_stack(bundle: Bundle, stack: Stack, n: int, reps: int) -> Row | None:
    """api.text.iter_search_text over ``n`` planes, cold caches (one concept), over its ONNX calls
    replayed: ``n`` x (encode + detect) and the one language-encoder run."""
    if bundle.texts() is None:
        return None
    state: dict = {}

    def plugin() -> None:
        headless = api.Bundle(bundle.adapter, bundle.folder)  # a fresh language cache
        encodes = _EncodeCount(bundle.adapter)
        with encodes:
            done = list(iter_search_text(headless, stack.data[:n], [CONCEPT],
                                         window=stack.window))
        state.update(language_calls=headless.texts.calls, encoder_calls=encodes.calls,
                     instances=sum(len(r.instances) for _, r in done))

    plugin()
    with Recorder() as rec:
        plugin()
    raw = rec.replay()
    timing = interleaved(plugin, raw, reps)
    note = (f"N={n}, '{CONCEPT}': language encoder {state['language_calls']}x, "
            f"encoder {state['encoder_calls']}x, {state['instances']} instances")
    row = _row("text-stack", bundle, timing, note, session_calls=rec.counts(), **state)
    return row.judge(also_ok=state["language_calls"] == 1)


def _propagate(bundle: Bundle, stack: Stack, n: int) -> tuple[np.ndarray, object]:
    seed = n // 2
    seeds = {1: Seed.clicks(seed, [stack.centre(seed)])}
    return api.propagate(api.Bundle(bundle.adapter, bundle.folder), stack.data[:n], seeds,
                         window=stack.window, stop_after_absent=None)


def propagation(bundle: Bundle, stack: Stack, n: int, reps: int) -> Row | None:
    """api.propagate over ``n`` planes from a click in the middle, both ways, cold cache, over
    its ONNX calls replayed (``n`` encodes + decoder / memory steps)."""
    if not bundle.adapter.has(Capability.CLICKS):
        return None
    _propagate(bundle, stack, n)
    with Recorder() as rec:
        labels, res = _propagate(bundle, stack, n)
    raw = rec.replay()
    timing = interleaved(lambda: _propagate(bundle, stack, n), raw, reps)
    note = (f"N={n}, {res.method}, encoder {res.encoder_calls}x, "
            f"{int((labels > 0).any(axis=(1, 2)).sum())} planes labelled")
    bank = _bank_figures(res)
    if bank:
        note += (f"; bank peak {bank['peak_memories']} memories / {bank['peak_pointers']} "
                 f"pointers (bound {bank['bound']}), {bank['peak_bytes'] / 1e6:.3f} MB")
    return _row("propagation", bundle, timing, note, session_calls=rec.counts(),
                method=res.method, encoder_calls=res.encoder_calls, bank=bank).judge()


def _bank_figures(res) -> dict:
    """The seeded object's memory bank: its peak counts and bytes (empty for carry-over)."""
    bank = next(iter(getattr(res, "banks", {}).values()), None)
    if bank is None:
        return {}
    return {"peak_memories": bank.peak_memories, "peak_pointers": bank.peak_pointers,
            "peak_bytes": bank.peak_nbytes, "held_bytes": bank.nbytes, "bound": bank.bound(2)}


def _status_kb(field: str) -> int | None:
    """A ``/proc/self/status`` field in bytes (Linux; None elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure_peak(folder: Path, test: bool, provider: str, n: int,
                 shape: tuple[int, int]) -> dict:
    """In this (fresh) process: one propagation over ``n`` planes, its peak memory.

    Sessions are loaded first (a 2-plane propagation), then the peak-RSS mark is reset and
    the ``n``-plane run is measured twice: peak RSS above the RSS before it (Linux) and, in a
    second run, the peak of numpy / Python allocations (tracemalloc).
    """
    bundle = open_one(folder.name, folder, provider, "-", test)
    stack = make_stack(n, shape)
    _propagate(bundle, stack, 2)
    before = _status_kb("VmRSS")
    ok = _reset_peak() and before is not None
    _propagate(bundle, stack, n)
    hwm = _status_kb("VmHWM")
    tracemalloc.start()
    _propagate(bundle, stack, n)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"rss_peak_above_start": (hwm - before) if ok and hwm else None,
            "tracemalloc_peak": int(peak)}


def _peak_in_child(bundle: Bundle, n: int, shape: tuple[int, int]) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.cases_engine", str(bundle.folder),
           "test" if bundle.test_graphs else "real", bundle.provider, str(n), *map(str, shape)]
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, timeout=1800, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def propagation_memory(bundle: Bundle, stack: Stack, n: int) -> Row | None:
    """Peak memory of one propagation over ``n`` and ``2n`` planes, each in a fresh process.

    Two measures: the process's peak RSS above its RSS before the run (Linux; onnxruntime's
    buffers included) and the peak of numpy / Python allocations (tracemalloc: the engine's
    own arrays, embeddings included). The difference between ``2n`` and ``n`` per plane is
    what each further plane costs.
    """
    if not bundle.adapter.has(Capability.CLICKS):
        return None
    shape = tuple(int(x) for x in stack.data.shape[1:])
    out = {count: _peak_in_child(bundle, count, shape) for count in (n, 2 * n)}
    a, b = out[n], out[2 * n]
    numpy_plane = (b["tracemalloc_peak"] - a["tracemalloc_peak"]) / n
    rss_a, rss_b = a["rss_peak_above_start"], b["rss_peak_above_start"]
    rss_plane = None if rss_a is None or rss_b is None else (rss_b - rss_a) / n
    note = (f"peak RSS above start N={n}: "
            f"{'?' if rss_a is None else f'{rss_a / 2**20:.0f}'} MiB, 2N={2 * n}: "
            f"{'?' if rss_b is None else f'{rss_b / 2**20:.0f}'} MiB; numpy (tracemalloc, "
            f"not onnxruntime's outputs) {a['tracemalloc_peak'] / 2**20:.1f} / "
            f"{b['tracemalloc_peak'] / 2**20:.1f} MiB = {numpy_plane / 2**20:.1f} MiB/plane")
    value = (rss_plane if rss_plane is not None else numpy_plane) / 2**20
    return Row("propagation-memory", bundle.name, used_provider(bundle), bundle.geometry,
               value=value, unit="MiB/plane", note=note,
               extra={"by_n": out, "rss_per_plane_bytes": rss_plane,
                      "numpy_per_plane_bytes": numpy_plane})


if __name__ == "__main__":  # the child process of propagation_memory
    folder, kind, provider, count, rows, cols = sys.argv[1:7]
    print(json.dumps(measure_peak(Path(folder), kind == "test", provider, int(count),
                                  (int(rows), int(cols)))))
