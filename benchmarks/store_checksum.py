"""What the embedding store's read checksums cost: a verified read against a bare zarr read.

Usage::

    python benchmarks/store_checksum.py [--reps 15]

The embedding has SAM 3 tracker's feature shapes (three levels, 21.2 MB in fp32). Each
repetition times :meth:`EmbeddingStore.get` (reads every array and compares its CRC-32) and a
bare read of the same zarr arrays (cast back to float32 like ``get``), in alternating order;
the ratio of the medians is the price of never serving a lost chunk as zeros.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from napari_sam3_onnx.engine.store.embedding_store import BundleTag, EmbeddingStore, EntryKey
from napari_sam3_onnx.engine.store.files import checksum
from napari_sam3_onnx.models.base import Embedding

SHAPES = {"image_embeddings.0": (1, 32, 288, 288), "image_embeddings.1": (1, 64, 144, 144),
          "image_embeddings.2": (1, 256, 72, 72)}


def embedding() -> Embedding:
    rng = np.random.default_rng(0)
    return Embedding({n: rng.normal(size=s).astype(np.float32) for n, s in SHAPES.items()},
                     (1008, 1008), (1040, 1392))


def bare_read(store: EmbeddingStore, key: EntryKey, cast: bool = True) -> list[np.ndarray]:
    """The entry's arrays straight from zarr (cast back to float32, as ``get`` does)."""
    group = store._root[key.path]
    arrays = [np.asarray(group[f"f{i}"][...]) for i in range(len(SHAPES))]
    return [a.astype(np.float32, copy=False) for a in arrays] if cast else arrays


def measure(store: EmbeddingStore, key: EntryKey, reps: int):
    """Seconds per repetition: verified get, bare read, checksums alone."""
    verified, bare, sums = [], [], []
    for rep in range(reps):
        order = [(verified, lambda: store.get(key)), (bare, lambda: bare_read(store, key))]
        for times, fn in order if rep % 2 else order[::-1]:
            t = time.perf_counter()
            assert fn() is not None
            times.append(time.perf_counter() - t)
        arrays = bare_read(store, key, cast=False)
        t = time.perf_counter()
        for a in arrays:
            checksum(a)
        sums.append(time.perf_counter() - t)
    return verified, bare, sums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    emb = embedding()
    mb = sum(a.nbytes for a in emb.features.values()) / 1e6
    for precision in ("fp32", "fp16"):
        with tempfile.TemporaryDirectory() as tmp:
            store = EmbeddingStore(Path(tmp) / "s.zarr", BundleTag("b", "l", "w"), precision)
            key = EntryKey("img", (0,), "f")
            store.put(key, emb)
            verified, bare, sums = measure(store, key, args.reps)
            v, b, c = (statistics.median(x) * 1e3 for x in (verified, bare, sums))
            print(f"{precision}: {mb:.1f} MB embedding; verified get {v:.1f} ms, bare zarr read "
                  f"{b:.1f} ms (ratio {v / b:.2f}); CRC-32 alone {c:.1f} ms")


if __name__ == "__main__":
    main()
