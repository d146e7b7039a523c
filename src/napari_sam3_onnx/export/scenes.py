"""Synthetic test scenes for the parity and precision checks (numpy only, no torch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

_F = TypeVar("_F", bound=Callable[..., Any])


def _not_a_test(func: _F) -> _F:
    """Mark a function named ``test_*`` as no pytest test (``__test__ = False``)."""
    marked: Any = func
    marked.__test__ = False
    return func


@_not_a_test
def test_image(seed: int, size: int = 1008, shift: tuple[float, float] = (0.0, 0.0)
               ) -> np.ndarray:
    """A ``(size, size, 3)`` uint8 RGB scene: smooth background and a few bright blobs.

    ``shift`` moves the blobs by ``(rows, cols)`` pixels (a stack whose objects drift).
    """
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size].astype(np.float32)
    img = np.zeros((size, size, 3), np.float32)
    for c in range(3):
        fy, fx = rng.uniform(1, 4, 2)
        img[..., c] = 60 + 25 * np.sin(yy / size * fy * np.pi) * np.cos(xx / size * fx * np.pi)
    blobs = rng.uniform([0.2, 0.2, 50, 40], [0.8, 0.8, 140, 110], size=(5, 4))
    for cy, cx, ry, rx in blobs:
        cy, cx = cy * size + shift[0], cx * size + shift[1]
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        img[inside] = rng.uniform(150, 240, 3)
    img += rng.normal(0, 4, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)

