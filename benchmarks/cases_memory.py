"""Memory per cached plane for each layout: measured on the test graphs, computed for SAM 3.

The test graphs keep SAM 3's spatial sizes but only a few channels, so the measured
``Embedding.nbytes`` is small. The same feature set with the real channel counts is computed
from the feature names and levels: the tracker ("sam2") neck has 32, 64 and 256 channels at
the 288, 144 and 72 levels; the detector ("sam3") neck has 256 on every level
(docs/layouts.md#geometry). The cache holds float32 (adapters cast fp16
outputs); the fp16 column is what the same plane would take if it were kept in half precision.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .bundles import Bundle
from .report import Row

#: Name fragments of tracker-neck features; any other feature is the detector neck's (256
#: channels on every level, whatever an export calls it: PIXL publishes no names).
TRACKER_NAMES = ("image_embeddings", "feats", "high_res")
#: Tracker-neck channels by level (0 = finest: 288 px in SAM 3).
TRACKER_NECK = (32, 64, 256)
#: SAM 3's level sizes, finest first.
SAM3_LEVELS = (288, 144, 72)


def real_shape(name: str, shape: tuple[int, ...], levels: tuple[int, int, int]) -> tuple:
    """The SAM 3 shape of a test-graph feature (same rank, real channels and level size).

    Parameters
    ----------
    name : str
        The feature's name in ``Embedding.features``.
    shape : tuple of int
        Its shape in the test graph, ``(1, C, L, L)``.
    levels : tuple of int
        The test geometry's level sizes, finest first.
    """
    level = levels.index(int(shape[-1]))
    channels = TRACKER_NECK[level] if any(p in name for p in TRACKER_NAMES) else 256
    size = SAM3_LEVELS[level]
    return (*shape[:-3], channels, size, size)


def plane_bytes(shapes: Mapping[str, tuple], itemsize: int) -> int:
    """Bytes of one plane's features at ``itemsize`` bytes per value."""
    return int(sum(np.prod(s) for s in shapes.values()) * itemsize)


def describe(shapes: Mapping[str, tuple]) -> str:
    """``32x288x288 + 64x144x144 + ...`` (leading 1s dropped)."""
    parts = []
    for s in shapes.values():
        dims = [d for d in s[:-3] if d != 1] + list(s[-3:])
        parts.append("x".join(str(int(d)) for d in dims))
    return " + ".join(parts)


def memory_row(bundle: Bundle, emb) -> Row:
    """One row: measured bytes of ``emb`` and, for test graphs, SAM 3's bytes per plane.

    The test geometry's levels follow from the mask size (the finest level, 4 x the grid).
    """
    measured = {k: tuple(v.shape) for k, v in emb.features.items()}
    extra: dict = {"measured_bytes": emb.nbytes, "measured_shapes": measured}
    if bundle.test_graphs:
        m = int(bundle.adapter.mask_size[0])
        levels = (m, m // 2, m // 4)
        real = {k: real_shape(k, s, levels) for k, s in measured.items()}
        fp32, fp16 = plane_bytes(real, 4), plane_bytes(real, 2)
        extra.update(real_shapes=real, real_fp32_bytes=fp32, real_fp16_bytes=fp16)
        note = (f"SAM 3: {describe(real)} = {fp32 / 1e6:.1f} MB fp32 / {fp16 / 1e6:.1f} MB fp16 "
                f"(test graphs: {emb.nbytes / 1e6:.2f} MB)")
        value = fp32 / 1e6
    else:
        fp16 = emb.nbytes // 2
        extra.update(real_fp32_bytes=emb.nbytes, real_fp16_bytes=fp16)
        note = (f"{describe(measured)} = {emb.nbytes / 1e6:.1f} MB as cached (fp32) / "
                f"{fp16 / 1e6:.1f} MB if kept fp16")
        value = emb.nbytes / 1e6
    return Row("memory/plane", bundle.name, "-", bundle.geometry, value=value, unit="MB",
               note=note, extra=extra)
