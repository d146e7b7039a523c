"""Print propagation cost on the memory test graphs: time per slice and memory-bank bytes.

Usage: ``python scripts/measure_propagation.py`` (needs the ``onnx`` testing extra). The test
graphs compute toy functions, so times show the engine's own overhead against the encoder's, not
SAM 3's real cost; bank bytes scale with the memory shape (SAM 3: 64 x 72 x 72 per slice).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tracking.propagation import Seed, propagate
from napari_sam3_onnx.models.bundle import open_bundle
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.memory import MEMORY_FULL, MEMORY_SMALL
from napari_sam3_onnx.testing.pagarcia import build_pagarcia


def drifting_blob(n: int, shape=(60, 90)) -> tuple[np.ndarray, list]:
    """``(n, rows, cols)`` uint8 stack with one disc drifting across it, and its centres."""
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    stack = np.zeros((n, *shape), np.uint8)
    centres = [(20 + 10 * np.sin(z / 9), 15 + 60 * z / max(n - 1, 1)) for z in range(n)]
    for z, (r, c) in enumerate(centres):
        stack[z][(rr - r) ** 2 + (cc - c) ** 2 <= 36] = 200
    return stack, centres


def measure(adapter, n: int) -> dict:
    """Encode all slices, then propagate both ways from a third of the way in (all cached)."""
    stack, centres = drifting_blob(n)
    refs = [SliceRef(stack, (z,), source="measure") for z in range(n)]
    encoder = SliceEncoder(adapter)
    t0 = time.perf_counter()
    encoder.embed_many(refs)
    encode = (time.perf_counter() - t0) / n
    seed = n // 3
    t0 = time.perf_counter()
    res = propagate(adapter, encoder, refs, {1: Seed.clicks(seed, [centres[seed]])})
    track = (time.perf_counter() - t0) / n  # every embedding is cached: tracking only
    bank = res.banks[1]
    return {"encode_ms": 1e3 * encode, "track_ms": 1e3 * track,
            "peak_memories": bank.peak_memories, "peak_pointers": bank.peak_pointers,
            "peak_bytes": bank.peak_nbytes, "held_bytes": bank.nbytes,
            "bound": bank.bound(2), "slices": len(res.objects[1].slices)}


def main() -> None:
    """Both memory layouts, small and SAM 3-sized test graphs, 50 and 200 slices."""
    root = Path(tempfile.mkdtemp())
    for geo_name, geo in (("small", MEMORY_SMALL), ("sam3-size", MEMORY_FULL)):
        for name, build in (("pagarcia", build_pagarcia), ("jax-video", build_jax_video)):
            adapter = open_bundle(build(root / f"{name}-{geo_name}", geometry=geo))
            measure(adapter, 8)  # warm-up: sessions load lazily
            for n in (50, 200):
                m = measure(adapter, n)
                print(f"{name:9s} {geo_name:9s} n={n:3d} encode {m['encode_ms']:7.2f} ms/slice"
                      f"  track {m['track_ms']:7.2f} ms/slice  bank peak {m['peak_memories']}"
                      f" memories / {m['peak_pointers']} pointers (bound {m['bound']}),"
                      f" {m['peak_bytes'] / 1e6:.3f} MB peak, {m['held_bytes'] / 1e6:.3f} MB"
                      f" at the end; {m['slices']} slices")
            adapter.close()


if __name__ == "__main__":
    main()
