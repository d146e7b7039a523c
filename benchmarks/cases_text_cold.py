"""Case ``text-cold``: the Text tab's cost on SAM 3-sized concept test graphs, stack vs encode.

Run with ``python benchmarks/run.py --no-gui --cases text-cold`` (figures in
docs/text-prompts.md). The test graphs have SAM 3's geometry (1008 input, 288 masks, a 4 x 4
toy detector) but toy arithmetic, so the encoder is far cheaper than SAM 3's (16-21 s per slice
on 2 CPU threads). The ratio ``stack time / (encode time x slices)`` is therefore an upper bound
on what the search adds on top of encoding: with real weights it moves towards 1.

For each layout it runs the Text tab's workflow (``api.search.iter_search``, without Qt) over a
480 x 720 stack whose slices plant different blobs (testing.scenes, upscaled 8x), for "bright"
at SAM 3's 0.5 floor, cold (every slice encoded) and warm (all slices cached, phrase cached),
and counts language-encoder runs per run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from napari_sam3_onnx.api.search import iter_search
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef, refs_along_axis
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.geometry import FULL, SMALL
from napari_sam3_onnx.testing.scenes import BLOBS, planted_image
from napari_sam3_onnx.testing.tokenizer import build_text_bundle

from .report import Row

CASE = "text-cold"
LAYOUTS = ("wkentaro-v0.3", "samexporter")
PLANTED = ((BLOBS[0], BLOBS[2]), (BLOBS[1], BLOBS[2], BLOBS[0]), (BLOBS[2],), BLOBS)


def planted_stack(slices: int, zoom: int = 8) -> np.ndarray:
    """``(slices, 60 zoom, 90 zoom)`` uint8: the planted scenes in turn, upscaled."""
    planes = [planted_image((60, 90), PLANTED[z % len(PLANTED)])[..., 0] for z in range(slices)]
    return np.stack([np.kron(p, np.ones((zoom, zoom), np.uint8)) for p in planes])


def refs_of(stack: np.ndarray, tag: str) -> list[SliceRef]:
    """One ref per slice of ``stack`` (a fresh ``tag`` = a cold cache)."""
    return refs_along_axis(stack, window=(0.0, 255.0), source=tag)


def timed_run(workspace: Workspace, refs: list[SliceRef], concepts: list[str]
              ) -> tuple[float, int]:
    """Seconds for the whole search and the number of instances found."""
    t0 = time.perf_counter()
    found = sum(len(step.result.instances) for step in iter_search(workspace, refs, concepts))
    return time.perf_counter() - t0, found


def measure(layout: str, folder: Path, slices: int, geometry=FULL) -> dict:
    """Encode-only time per slice, then cold and warm whole-stack runs of the Text workflow."""
    adapter = open_adapter(build_text_bundle(folder, layout, geometry))
    workspace = Workspace()
    workspace.attach(adapter, folder)
    texts = workspace.texts
    stack = planted_stack(slices)
    SliceEncoder(adapter).embed(refs_of(stack, "warm-up")[0])  # sessions load lazily
    texts.get("warm-up")
    encoder = SliceEncoder(adapter)
    t0 = time.perf_counter()
    encoder.embed_many(refs_of(stack, "encode-only"))
    encode = (time.perf_counter() - t0) / slices
    calls0 = texts.calls
    cold_refs = refs_of(stack, "cold")
    cold, found = timed_run(workspace, cold_refs, ["bright"])
    cold_calls = texts.calls - calls0
    spent = []
    detector = adapter.concept_detector
    detect = detector.detect

    def timed_detect(*args, **kwargs):
        t = time.perf_counter()
        out = detect(*args, **kwargs)
        spent.append(time.perf_counter() - t)
        return out

    detector.detect = timed_detect  # type: ignore[method-assign]
    warm, _ = timed_run(workspace, cold_refs, ["bright"])  # same refs, cache and phrase
    detector.detect = detect  # type: ignore[method-assign]
    calls1 = texts.calls
    timed_run(workspace, cold_refs, ["bright", "thing"])
    assert workspace.encoder is not None
    adapter.close()
    return {"layout": layout, "slices": slices, "encode_s": encode, "cold_s": cold,
            "ratio": cold / (encode * slices), "warm_per_slice_ms": 1e3 * warm / slices,
            "detect_ms": 1e3 * sum(spent) / slices,
            "instances": found, "lang_calls_cold": cold_calls,
            "lang_calls_warm": texts.calls - calls1 - 1,  # "thing" is new: one call
            "encoder_calls": workspace.encoder.encoder_calls}


def rows(root: Path, slices: int, quick: bool) -> list[Row]:
    """One row per concept layout: the cold stack over encode-only time (``value``, a ratio).

    ``extra`` holds every figure: ``encode_s``, ``cold_s``, ``warm_per_slice_ms``,
    ``detect_ms`` (the detector graph's part of the warm run), ``instances``, language-encoder
    runs in a cold run with one phrase (``lang_calls_cold``) and in a later run of the same
    phrase plus a new one, minus the new one's (``lang_calls_warm``), and ``encoder_calls``.
    """
    geometry = SMALL if quick else FULL
    out = []
    for layout in LAYOUTS:
        m = measure(layout, root / f"text-cold-{layout}", slices, geometry)
        out.append(Row(CASE, layout, geometry="small" if quick else "full",
                       value=m["ratio"], unit="x encode",
                       note=f"{slices} slices of 480x720: stack (cold) / (encode x slices)",
                       extra=m))
    return out
