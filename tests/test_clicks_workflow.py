"""The clicks-and-boxes workflow of api.clicks, which the Clicks tab runs (no viewer needed)."""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.engine.encoding import SliceRef


def test_the_clicks_tab_run_and_api_segment_are_one_path(hf_bundle):
    # The widget's job (several objects, one of them broken) and api.segment answer the same
    # masks through segment_object, each plane encoded once for both.
    from conftest import blob_image, disc
    from napari_sam3_onnx import api
    from napari_sam3_onnx.api.clicks import Job, run_job
    from napari_sam3_onnx.engine.interactive import Prompt
    from napari_sam3_onnx.engine.store.embedding_store import fingerprint

    bundle = api.open_bundle(hf_bundle)
    img = blob_image((60, 90), ((15, 20, 6), (40, 65, 7)))
    encodes = []
    encode = bundle.adapter.encode
    bundle.adapter.encode = lambda rgb: encodes.append(rgb.shape) or encode(rgb)
    ref = SliceRef(img, (), False, None, source="image", data_version=fingerprint(img))
    objects = [(("a",), Prompt.clicks(np.array([[40, 65]]), None)),
               (("bad",), Prompt.clicks(np.zeros((0, 2)), None, np.array([30, 30, 30, 30]))),
               (("b",), Prompt.clicks(np.array([[15, 20]]), None))]
    result = run_job(bundle.encoder(None, bundle.cache), Job(7, ref, objects))
    assert [key for key, _, _ in result.masks] == [("a",), ("b",)]
    assert len(result.problems) == 1 and result.job.generation == 7
    masks = {key[0]: m.mask for key, _, m in result.masks}
    for key, (r, c, radius) in (("a", (40, 65, 7)), ("b", (15, 20, 6))):
        truth = disc((60, 90), r, c, radius)
        assert (masks[key] & truth).sum() / (masks[key] | truth).sum() > 0.75
        np.testing.assert_array_equal(api.segment(bundle, img, [[r, c]]).mask, masks[key])
    assert len(encodes) == 1  # the job encoded the plane; api.segment read it from the cache
