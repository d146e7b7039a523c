"""A/B of the engine fast paths against the code they replaced (kept in tests/test_fast_paths.py).

Usage: ``python benchmarks/fast_paths_ab.py``. Each line is new / old, interleaved in one
process, median and inter-quartile range; both sides give identical results (the tests say so).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import test_fast_paths as ref  # noqa: E402
from benchmarks.timing import interleaved  # noqa: E402
from napari_sam3_onnx.engine.concepts.search import search_slice  # noqa: E402
from napari_sam3_onnx.engine.postprocess import logits_to_mask, upsample_logits  # noqa: E402
from napari_sam3_onnx.engine.tracking.steps import interior_point  # noqa: E402
from napari_sam3_onnx.models.base import Detections  # noqa: E402
from napari_sam3_onnx.models.imageops import resize_bilinear, resize_rgb_uint8  # noqa: E402

SHAPE = (1024, 1024)


def report(name: str, new, old, reps: int = 15) -> None:
    """Print new / old for one path."""
    t = interleaved(new, old, reps).summary()
    print(f"{name:38s} new {t['plugin_ms']:8.2f} ms  old {t['raw_ms']:8.2f} ms  new/old "
          f"{t['ratio']:.3f} ({t['ratio_q1']:.3f}-{t['ratio_q3']:.3f})")


def main() -> None:
    """The four paths on a 1024 x 1024 plane."""
    low = np.full((288, 288), -8, np.float32)
    low[120:140, 100:125] = 6
    report("click mask 288 -> 1024 (one nucleus)", lambda: logits_to_mask(low, SHAPE),
           lambda: upsample_logits(low, SHAPE) > 0)
    gray = (np.random.default_rng(0).random(SHAPE) * 255).astype(np.uint8)
    rgb = np.repeat(gray[:, :, None], 3, axis=2)
    report("gray plane as RGB 1024 -> 1008", lambda: resize_rgb_uint8(rgb, (1008, 1008)),
           lambda: np.clip(np.rint(resize_bilinear(rgb, (1008, 1008))), 0, 255).astype(
               np.uint8), 7)
    mask = np.zeros(SHAPE, bool)
    mask[400:470, 500:560] = True
    report("carry-over interior point", lambda: interior_point(mask),
           lambda: ref._interior_full(mask))
    masks = np.full((16, 288, 288), -8, np.float32)
    for k in range(16):
        r, c = (k // 4) * 72 + 36, (k % 4) * 72 + 36
        masks[k, r - 25:r + 25, c - 25:c + 25] = 5
    scores = np.random.default_rng(0).uniform(0.6, 0.99, 16).astype(np.float32)
    det = Detections(scores, np.zeros((16, 4), np.float32), masks, "logits")
    emb = type("E", (), {"image_shape": SHAPE})()
    adapter = ref._Fixed([("a", det)])
    report("text: 16 instances on a plane",
           lambda: search_slice(adapter, emb, ["a"], ref._Texts()),
           lambda: ref._reference([("a", det)], SHAPE, 0.5, 0, False), 7)


if __name__ == "__main__":
    main()
