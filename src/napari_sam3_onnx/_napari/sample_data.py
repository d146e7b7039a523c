"""napari sample data: a synthetic uint16 z-stack of nuclei (no download, deterministic)."""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.samples.synthetic import synthetic_nuclei

#: Voxel size of the sample in micrometres (z, y, x): anisotropic, like a widefield stack.
SCALE = (2.0, 0.5, 0.5)


def synthetic_nuclei_sample() -> list[tuple]:
    """The "Synthetic nuclei (uint16 z-stack)" sample: 12 x 180 x 240 uint16, seed 0.

    Returns
    -------
    list of LayerDataTuple
        One image layer with a contrast window from the 0.5th to the 99.8th percentile.
    """
    image, _ = synthetic_nuclei()
    lo, hi = np.percentile(image, [0.5, 99.8])
    meta = {
        "name": "synthetic nuclei",
        "colormap": "gray",
        "contrast_limits": (float(lo), float(hi)),
        "scale": SCALE,
        "units": ("micrometer",) * 3,
        "metadata": {"source": "napari_sam3_onnx.samples.synthetic.synthetic_nuclei(seed=0)"},
    }
    return [(image, meta, "image")]
