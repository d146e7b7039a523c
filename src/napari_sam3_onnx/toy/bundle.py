"""The toy model the plugin ships: every workflow, no weights, not SAM 3.

One ``nso-sam3`` bundle (:mod:`~napari_sam3_onnx.toy.nso`: image encoder, prompt decoder,
language encoder, concept detector, memory encoder and attention) with a tokenizer, so clicks,
boxes, text, exemplars and propagation all run. It finds the bright blobs of the synthetic
nuclei sample (:func:`~napari_sam3_onnx.samples.synthetic.synthetic_nuclei`) at every tab's
default settings:

* clicks and boxes: the toy SAM head (bright pixels near a positive click or inside a box);
* text: any word but ``"nothing"`` (and ``"bright"``, which keeps only the brightest pixels)
  finds every blob brighter than a quarter of the contrast window, **one instance per blob**:
  the detector's queries are the blobs' centres (:func:`blob_queries`), not a grid of cells;
* propagation: the toy memory graphs follow the remembered blob from slice to slice.

The registry entry ``"toy"`` (builder ``"toy"``) is built from this module:
:func:`~napari_sam3_onnx.api.bundle_fetch.local_builder` imports it and
:func:`~napari_sam3_onnx.models.local_bundles.build_local_bundle` calls :func:`build` once per
:func:`definition_digest` and caches the folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .blobs import blob_partition
from .builder import GraphBuilder
from .concepts import (
    SCORE_BIAS,
    SCORE_GAIN,
    TOKEN_ANY,
    TOKEN_BRIGHT,
    TOKEN_FAINT,
    TOKEN_NOTHING,
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
#: Exemplar box slots.
SLOTS = 4

_SOURCES = ("builder", "concepts", "geometry", "memory", "nso", "semantics", "tokenizer",
            "blobs", "bundle", "head")


def definition_digest() -> str:
    """SHA-256 (hex) of :data:`TOY_VERSION` and the source of every module the toy is built from.

    A changed toy gets a new cache folder; an unchanged one is built once.
    """
    h = hashlib.sha256(f"toy-{TOY_VERSION}".encode())
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update((here / f"{name}.py").read_bytes())
    return h.hexdigest()


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
    from .head import blob_refine

    folder = build_nso(Path(folder), GEOMETRY, slots=SLOTS, detector=blob_detector,
                       refine=blob_refine)
    write_toy_tokenizer(folder, WORDS)
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["source"] = {"toy": True, "builder": __name__, "digest": definition_digest()}
    manifest_path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return folder
