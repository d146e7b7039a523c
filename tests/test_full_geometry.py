"""The real SAM 3 geometry (1008-px input, 288-px masks): nothing is hard-coded to small sizes."""

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx.engine.interactive import Prompt, segment
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.geometry import FULL
from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker


@pytest.mark.slow
def test_hf_tracker_full_geometry_click(tmp_path):
    adapter = open_adapter(build_hf_tracker(tmp_path, FULL))
    assert adapter.input_size == (1008, 1008) and adapter.mask_size == (288, 288)
    shape, blobs = (300, 420), ((80, 100, 25), (210, 330, 30))
    rgb = np.repeat(blob_image(shape, blobs)[..., None], 3, axis=2)
    emb = adapter.encode(rgb)
    assert emb.features["image_embeddings.0"].shape == (1, 2, 288, 288)
    res = segment(adapter, emb, Prompt.clicks([[210, 330]]))
    truth = disc(shape, 210, 330, 30)
    assert (res.mask & truth).sum() / (res.mask | truth).sum() > 0.9
    assert not (res.mask & disc(shape, 80, 100, 27)).any()
