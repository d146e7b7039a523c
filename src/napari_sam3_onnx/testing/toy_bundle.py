"""The toy model the plugin ships: every workflow, no weights, not SAM 3.

One ``nso-sam3`` bundle (:mod:`~napari_sam3_onnx.testing.nso`: image encoder, prompt decoder,
language encoder, concept detector, memory encoder and attention) with a tokenizer, so clicks,
boxes, text, exemplars and propagation all run. It finds the bright blobs of the synthetic
nuclei sample (:func:`~napari_sam3_onnx.engine.synthetic.synthetic_nuclei`) at every tab's
default settings:

* clicks and boxes: the toy SAM head (bright pixels near a positive click or inside a box);
* text: any word but ``"nothing"`` (and ``"bright"``, which keeps only the brightest pixels)
  finds every blob brighter than a quarter of the contrast window, **one instance per blob**:
  the detector's queries are the blobs' centres (:func:`blob_queries`), not a grid of cells;
* propagation: the toy memory graphs follow the remembered blob from slice to slice.

The registry entry ``"toy"`` names this module as its builder:
:func:`~napari_sam3_onnx.models.local_bundles.build_local_bundle` calls :func:`build` once per
:func:`definition_digest` and caches the folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .builder import GraphBuilder
from .concepts import (
    FAR,
    SCORE_BIAS,
    SCORE_GAIN,
    TOKEN_ANY,
    TOKEN_BRIGHT,
    TOKEN_FAINT,
    TOKEN_NOTHING,
    ints,
)
from .geometry import TestGeometry
from .nso import _detector, build_nso
from .tokenizer import write_toy_tokenizer

#: Bump when the toy's behaviour changes in a way its source digest would not show.
TOY_VERSION = 1
#: 280-px input, 80-px masks: fine enough to outline a 240 x 180 sample's nuclei.
GEOMETRY = TestGeometry(grid=20, channels=(2, 3, 8))
#: Words with their own token: the words for nuclei read as "faint" (level 0.2: dim,
#: out-of-focus nuclei count), "bright" 0.7, "nothing" finds nothing; every other word falls
#: apart into byte tokens, which read as "anything" (0.25).
WORDS = {"nucleus": TOKEN_FAINT, "nuclei": TOKEN_FAINT + 100, "cell": TOKEN_FAINT + 200,
         "thing": TOKEN_ANY, "bright": TOKEN_BRIGHT, "nothing": TOKEN_NOTHING}
#: Queries (instances) the detector can return per slice.
QUERIES = 16
#: Exemplar box slots.
SLOTS = 4
#: Blob finding on the L x L mask grid, as fractions of L: smoothing window, the radius within
#: which a blob has one centre, the radius a centre claims pixels within; least on-coverage.
SMOOTH, SEPARATION, REACH, MIN_COVER = 0.09, 0.13, 0.16, 0.35

_SOURCES = ("builder", "concepts", "geometry", "memory", "nso", "semantics", "tokenizer",
            "toy_bundle", "toy_head")


def definition_digest() -> str:
    """SHA-256 (hex) of :data:`TOY_VERSION` and the source of every module the toy is built from.

    A changed toy gets a new cache folder; an unchanged one is built once.
    """
    h = hashlib.sha256(f"toy-{TOY_VERSION}".encode())
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update((here / f"{name}.py").read_bytes())
    return h.hexdigest()


def blob_partition(b: GraphBuilder, brightness: str, level: str, size: int
                   ) -> tuple[str, str, str, str, str]:
    """The bright blobs of a plane: one centre per blob and the pixels each centre claims.

    ``on`` = brightness > ``level``; its local coverage (box mean over ``SMOOTH * L`` pixels,
    twice) peaks once near each blob's centre. Peaks (the maximum within ``SEPARATION * L``,
    coverage >= :data:`MIN_COVER`) are ranked by coverage and the best :data:`QUERIES` kept;
    each claims the pixels nearer to it than to any other peak, within ``REACH * L``.

    Parameters
    ----------
    brightness : str
        ``[L*L]`` float brightness on the mask grid (row-major).
    level : str
        ``[1]`` float brightness level.
    size : int
        ``L``.

    Returns
    -------
    tuple of str
        ``member [Q, L*L]`` float 0/1, ``cover [Q]`` float (0 for no peak), ``live [Q]`` bool,
        and the peaks' grid ``column [Q]`` and ``row [Q]`` (float, cell units).
    """
    n, q = size * size, QUERIES
    on = b.Cast(b.Greater(brightness, level), to=1)
    grid = b.Reshape(on, ints(b, 1, 1, size, size))
    k = max(3, round(SMOOTH * size) | 1)
    for _ in range(2):
        grid = b.AveragePool(grid, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[1, 1],
                             count_include_pad=1)
    # A small ramp breaks ties on a plateau, so a flat blob still has one peak (its steps stay
    # well above float32 resolution near 1; the row and column rates are incommensurate).
    r_, c_ = np.mgrid[0:size, 0:size].astype(np.float32) / size
    ramp = (1e-3 * c_ + 2.7e-3 * r_).reshape(1, 1, size, size)
    cover = b.Add(grid, b.const(ramp))
    r = max(1, round(SEPARATION * size))
    top = b.MaxPool(cover, kernel_shape=[2 * r + 1] * 2, pads=[r] * 4, strides=[1, 1])
    peak = b.And(b.GreaterOrEqual(cover, top), b.GreaterOrEqual(cover, b.const(MIN_COVER)))
    score = b.Reshape(b.Mul(b.Cast(peak, to=1), cover), ints(b, n))
    values, index = b.op_n("TopK", [score, ints(b, q)], 2, axis=0, largest=1, sorted=1)
    live = b.Greater(values, b.const(0.0))  # [Q]
    fidx = b.Cast(index, to=1)
    qy = b.Floor(b.Div(fidx, b.const(float(size))))
    qx = b.Sub(fidx, b.Mul(qy, b.const(float(size))))
    j = np.arange(n, dtype=np.float32)
    gy, gx = b.const((j // size)[None]), b.const((j % size)[None])  # [1, N]
    dx = b.Sub(gx, b.Unsqueeze(qx, ints(b, 1)))
    dy = b.Sub(gy, b.Unsqueeze(qy, ints(b, 1)))
    dead = b.Mul(b.Cast(b.Not(live), to=1), b.const(FAR))
    d2 = b.Add(b.Add(b.Mul(dx, dx), b.Mul(dy, dy)), b.Unsqueeze(dead, ints(b, 1)))  # [Q, N]
    nearest = b.ArgMin(d2, axis=0, keepdims=1)  # [1, N]
    mine = b.Equal(nearest, b.const(np.arange(q)[:, None], "int64"))
    reach = float(REACH * size) ** 2
    member = b.Cast(b.And(mine, b.LessOrEqual(d2, b.const(reach))), to=1)
    return member, values, live, qx, qy


def blob_queries(b: GraphBuilder, brightness: str, level: str, size: int) -> tuple[str, str]:
    """One detector query per bright blob (a :func:`~.concepts.toy_detector` ``queries``).

    The queries are :func:`blob_partition`'s blobs at the text level; a query's logit is
    ``SCORE_GAIN * coverage - SCORE_BIAS`` (-8 if no peak is left for it).

    Returns
    -------
    tuple of str
        ``member [Q, L*L]`` float 0/1 and ``logits [Q]`` float.
    """
    member, values, live, _qx, _qy = blob_partition(b, brightness, level, size)
    logits = b.Sub(b.Mul(values, b.const(SCORE_GAIN)), b.const(SCORE_BIAS))
    logits = b.Where(live, logits, b.const(-8.0))
    return member, logits


def blob_detector(geometry: TestGeometry, slots: int) -> GraphBuilder:
    """The ``nso-sam3`` concept detector with :func:`blob_queries` as its queries."""
    return _detector(geometry, slots, queries=blob_queries)


def build(folder: Path | str) -> Path:
    """Write the toy bundle into ``folder`` (created) and return it (needs ``onnx``)."""
    from .toy_head import blob_refine

    folder = build_nso(Path(folder), GEOMETRY, slots=SLOTS, detector=blob_detector,
                       refine=blob_refine)
    write_toy_tokenizer(folder, WORDS)
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["source"] = {"toy": True, "builder": __name__, "digest": definition_digest()}
    manifest_path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return folder
