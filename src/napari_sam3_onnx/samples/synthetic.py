"""Deterministic synthetic microscopy data for samples, demos and tests (numpy only).

The stack looks like a widefield z-series of a few nuclei: dim, noisy background; bright
elliptical nuclei with some texture that drift slowly across z and fade in and out of focus.
Everything is generated from a seed, so the same call always returns the same pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Nucleus:
    """One synthetic nucleus (slice pixels; ``drift`` is pixels per z step).

    Attributes
    ----------
    centre : tuple[float, float]
        ``(row, col)`` of the centre at z = 0.
    drift : tuple[float, float]
        ``(d_row, d_col)`` added per z step.
    radii : tuple[float, float]
        Semi-axes along rows and columns.
    z_focus : float
        Slice where the nucleus is brightest.
    brightness : float
        Peak intensity above the background (counts).
    """

    centre: tuple[float, float]
    drift: tuple[float, float]
    radii: tuple[float, float]
    z_focus: float
    brightness: float


def layout_nuclei(
    shape: tuple[int, int, int], n_nuclei: int, rng: np.random.Generator
) -> list[Nucleus]:
    """Place ``n_nuclei`` on a jittered grid so that neighbours stay well apart."""
    nz, rows, cols = shape
    n_cols = int(np.ceil(np.sqrt(n_nuclei * cols / rows)))
    n_rows = int(np.ceil(n_nuclei / n_cols))
    cell_r, cell_c = rows / n_rows, cols / n_cols
    nuclei = []
    for i in range(n_nuclei):
        gr, gc = divmod(i, n_cols)
        radius = rng.uniform(0.16, 0.22) * min(cell_r, cell_c)
        nuclei.append(
            Nucleus(
                centre=(
                    (gr + 0.5) * cell_r + rng.uniform(-0.1, 0.1) * cell_r,
                    (gc + 0.5) * cell_c + rng.uniform(-0.1, 0.1) * cell_c,
                ),
                drift=(rng.uniform(-0.8, 0.8), rng.uniform(-1.2, 1.2)),
                radii=(radius * rng.uniform(0.8, 1.0), radius * rng.uniform(1.0, 1.3)),
                z_focus=rng.uniform(0.3, 0.7) * (nz - 1),
                brightness=rng.uniform(2500.0, 4500.0),
            )
        )
    return nuclei


def synthetic_nuclei(
    shape: tuple[int, int, int] = (12, 180, 240),
    n_nuclei: int = 6,
    seed: int = 0,
    background: float = 600.0,
    noise: float = 60.0,
) -> tuple[np.ndarray, np.ndarray]:
    """A uint16 z-stack of drifting nuclei and its ground-truth labels.

    Parameters
    ----------
    shape : tuple[int, int, int]
        ``(z, rows, cols)`` of the stack; deliberately non-square by default.
    n_nuclei : int
        Number of nuclei; label ``i + 1`` is nucleus ``i``.
    seed : int
        Seed of the random generator (same seed, same stack).
    background, noise : float
        Mean background level and the standard deviation of the Gaussian noise (counts).

    Returns
    -------
    image : numpy.ndarray
        ``shape`` uint16 intensities.
    labels : numpy.ndarray
        ``shape`` int32 ground truth: each nucleus's ellipse (the half-height of its soft edge).
    """
    rng = np.random.default_rng(seed)
    nz, rows, cols = shape
    nuclei = layout_nuclei(shape, n_nuclei, rng)
    rr, cc = np.mgrid[0:rows, 0:cols].astype(np.float32)
    # A smooth low-frequency texture shared by all nuclei (chromatin-like mottling).
    texture = _smooth_noise((rows, cols), rng, scale=6)
    image = np.empty(shape, np.float32)
    labels = np.zeros(shape, np.int32)
    for z in range(nz):
        plane = np.full((rows, cols), background, np.float32)
        plane += 80.0 * _gradient(rows, cols, z, nz)
        for i, nuc in enumerate(nuclei):
            r0 = nuc.centre[0] + nuc.drift[0] * z
            c0 = nuc.centre[1] + nuc.drift[1] * z
            d2 = ((rr - r0) / nuc.radii[0]) ** 2 + ((cc - c0) / nuc.radii[1]) ** 2
            focus = np.exp(-0.5 * ((z - nuc.z_focus) / max(nz / 3.0, 1.0)) ** 2)
            profile = 1.0 / (1.0 + np.exp(np.minimum((d2 - 1.0) * 6.0, 50.0)))  # soft edge
            body = profile * (0.85 + 0.3 * texture)
            plane += nuc.brightness * focus * body
            labels[z][(profile > 0.5) & (labels[z] == 0)] = i + 1
        plane += rng.normal(0.0, noise, plane.shape).astype(np.float32)
        image[z] = plane
    return np.clip(np.rint(image), 0, 65535).astype(np.uint16), labels


def _gradient(rows: int, cols: int, z: int, nz: int) -> np.ndarray:
    """Uneven illumination: a gentle ramp across the field that tilts with z."""
    r = np.linspace(-1.0, 1.0, rows, dtype=np.float32)[:, None]
    c = np.linspace(-1.0, 1.0, cols, dtype=np.float32)[None, :]
    tilt = (z / max(nz - 1, 1)) - 0.5
    return c + tilt * r


def _smooth_noise(shape: tuple[int, int], rng: np.random.Generator, scale: int) -> np.ndarray:
    """Noise in [-1, 1] smoothed by block-upsampling a coarse grid (no scipy needed)."""
    coarse = rng.uniform(-1.0, 1.0, (shape[0] // scale + 2, shape[1] // scale + 2))
    fine = np.kron(coarse, np.ones((scale, scale)))[: shape[0], : shape[1]]
    # Two passes of a 3-tap box filter along each axis soften the block edges.
    for axis in (0, 1):
        for _ in range(2):
            fine = (np.roll(fine, 1, axis) + fine + np.roll(fine, -1, axis)) / 3.0
    return fine.astype(np.float32)
