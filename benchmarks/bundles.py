"""The bundles and data the benchmarks run on: test graphs of every layout, or real bundles."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from napari_sam3_onnx.engine.concepts.search import TextCache
from napari_sam3_onnx.engine.concepts.tokenizer import TOKENIZER_FILES, ClipTokenizer
from napari_sam3_onnx.models.base import Capability, SamAdapter
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import ModelFileMissingError
from napari_sam3_onnx.models.runtime import LazySession, RuntimeConfig, available_providers

#: Providers that are not compute devices (onnxruntime lists Azure's remote provider).
NOT_DEVICES = {"AzureExecutionProvider"}


def test_geometries(name: str):
    """``(plain, memory)`` test geometries: ``"full"`` = SAM 3's 1008 / 288, ``"small"``."""
    from napari_sam3_onnx.testing.geometry import FULL, SMALL
    from napari_sam3_onnx.testing.memory import MEMORY_FULL, MEMORY_SMALL

    return (FULL, MEMORY_FULL) if name == "full" else (SMALL, MEMORY_SMALL)


def test_builders(geometry: str) -> dict[str, Callable[[Path], Path]]:
    """Builders of the test bundle of every layout, by layout name (needs ``onnx``)."""
    from napari_sam3_onnx.testing import (
        autognosi,
        comicapp,
        hf_sam3,
        hf_tracker,
        jax_video,
        pagarcia,
        pixl,
        samexporter,
        wkentaro,
    )

    plain, mem = test_geometries(geometry)
    return {
        "hf-tracker": lambda d: hf_tracker.build_hf_tracker(d, plain),
        "wkentaro-v0.3": lambda d: wkentaro.build_wkentaro_v03(d, plain),
        "wkentaro-v0.6": lambda d: wkentaro.build_wkentaro_v06(d, plain),
        "samexporter-0.5": lambda d: samexporter.build_samexporter(d, plain),
        "autognosi-int8": lambda d: autognosi.build_autognosi(d, plain),
        "comicapp-sam3.1": lambda d: comicapp.build_comicapp(d, plain),
        "pagarcia-tracker": lambda d: pagarcia.build_pagarcia(d, mem),
        "jax-video": lambda d: jax_video.build_jax_video(d, mem),
        "pixl-sam3": lambda d: pixl.build_pixl(d, plain),
        # the public-graphs composite: dual encoder + text/detector + jax-video memory graphs
        "hf-sam3": lambda d: hf_sam3.build_dual(d, mem, memory=True),
        "hf-sam3-student": lambda d: hf_sam3.build_dual(d, mem, memory=True, student=True),
    }


def write_toy_vocab(folder: Path) -> None:
    """A minimal BPE merges file (no merges) so the concept test graphs can take text."""
    if not any((folder / n).is_file() for n in TOKENIZER_FILES):
        with gzip.open(folder / "bpe_simple_vocab_16e6.txt.gz", "wt", encoding="utf-8") as f:
            f.write("#version\n")


@dataclass
class Bundle:
    """An opened bundle with what the cases need to know about it."""

    name: str
    folder: Path
    adapter: SamAdapter
    provider: str
    geometry: str
    test_graphs: bool

    def texts(self) -> TextCache | None:
        """A fresh language cache (None: no text path or no tokenizer file)."""
        if not self.adapter.has(Capability.TEXT):
            return None
        try:
            return TextCache(self.adapter, ClipTokenizer.from_folder(self.folder))
        except ModelFileMissingError:
            return None


def build_test_bundles(root: Path, geometry: str, names: list[str] | None = None) -> dict:
    """Write the test bundles under ``root``; returns ``{layout: folder}``."""
    out = {}
    for name, build in test_builders(geometry).items():
        if names is not None and name not in names:
            continue
        folder = build(root / f"{name}-{geometry}")
        write_toy_vocab(folder)
        out[name] = folder
    return out


def open_one(name: str, folder: Path, provider: str, geometry: str, test: bool,
             threads: int = 0) -> Bundle:
    """Open ``folder`` on ``provider`` (``"auto"`` or a provider name), ``threads`` per op."""
    config = RuntimeConfig(providers=provider if provider == "auto" else (provider,),
                           intra_op_threads=threads)
    adapter = open_adapter(folder, config)
    label = name if test else f"{adapter.layout} ({folder.name})"
    return Bundle(label, folder, adapter, provider, geometry, test)


def provider_sweep(sweep: bool) -> list[str]:
    """``["auto"]``, or with ``sweep`` the CPU and then every other installed device provider.

    With a CUDA build of onnxruntime, its CUDA / cuDNN libraries are preloaded from the pip
    packages where there are any (``onnxruntime.preload_dlls``, onnxruntime >= 1.21).
    """
    others = [p for p in available_providers()
              if p not in NOT_DEVICES and p != "CPUExecutionProvider"]
    if others:
        import onnxruntime

        try:
            onnxruntime.preload_dlls()  # type: ignore[attr-defined]
        except Exception:  # older onnxruntime, or the libraries come from the system
            pass
    return ["CPUExecutionProvider", *others] if sweep else ["auto"]


def used_provider(bundle: Bundle) -> str:
    """The provider the bundle's first loaded session really runs on (after fallbacks)."""
    values = list(vars(bundle.adapter).values())
    for value in values:
        if isinstance(value, dict):
            values += list(value.values())
        elif isinstance(value, LazySession) and value.loaded:
            return value.providers[0].replace("ExecutionProvider", "")
    return bundle.provider.replace("ExecutionProvider", "")


@dataclass
class Stack:
    """A uint16 z-stack of bright discs seen through a contrast window, and their labels."""

    data: np.ndarray
    window: tuple[float, float]
    labels: np.ndarray

    def centre(self, z: int, label: int = 6) -> tuple[float, float]:
        """``(row, col)`` centroid of disc ``label`` on plane ``z``."""
        rr, cc = np.nonzero(self.labels[z] == label)
        return float(rr.mean()), float(cc.mean())


def make_stack(n: int, shape: tuple[int, int], grid: int = 4, seed: int = 0) -> Stack:
    """``n`` planes of ``shape``: a ``grid x grid`` lattice of bright discs that drift with z.

    The discs fill most of their lattice cell, so the toy concept detector (one query per cell
    of a 4 x 4 grid) finds them as instances, as SAM 3 finds nuclei: the text case then pays for
    what real detections cost (mask upsampling, overlap resolution), not for an empty result.
    Background 600 counts with a ramp and Gaussian noise (sd 60), discs +3000; the window is the
    1 % / 99.5 % levels of the stack.
    """
    rng = np.random.default_rng(seed)
    rows, cols = shape
    cell_r, cell_c = rows / grid, cols / grid
    radius = 0.4 * min(cell_r, cell_c)
    rr, cc = np.mgrid[0:rows, 0:cols].astype(np.float32)
    data = np.empty((n, rows, cols), np.uint16)
    labels = np.zeros((n, rows, cols), np.int32)
    ramp = 80.0 * (cc / max(cols - 1, 1))
    for z in range(n):
        plane = 600.0 + ramp + rng.normal(0.0, 60.0, shape).astype(np.float32)
        shift = 0.05 * radius * (z - n / 2)
        for k in range(grid * grid):
            r0 = (k // grid + 0.5) * cell_r + shift
            c0 = (k % grid + 0.5) * cell_c - shift
            disc = (rr - r0) ** 2 + (cc - c0) ** 2 <= radius**2
            plane[disc] += 3000.0
            labels[z][disc] = k + 1
        data[z] = np.clip(np.rint(plane), 0, 65535).astype(np.uint16)
    lo, hi = np.percentile(data[: min(n, 2)], [1, 99.5])
    return Stack(data, (float(lo), float(hi)), labels)
