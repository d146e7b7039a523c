"""The "check the contrast limits" test: a window that maps varying data to black is told apart."""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.engine.contrast import prompt_region, window_hides_region
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei


def test_a_window_above_the_data_hides_it_and_the_sample_window_does_not():
    image, _ = synthetic_nuclei()
    lo, hi = np.percentile(image, [0.5, 99.8])
    assert not window_hides_region(image, (6,), (float(lo), float(hi)))
    assert window_hides_region(image, (6,), (60000.0, 65535.0))
    assert not window_hides_region(image, (6,), None)  # no window: the data as they are


def test_only_the_prompted_region_counts():
    plane = np.full((50, 80), 100, np.uint16)
    plane[5:15, 60:75] = np.arange(150, dtype=np.uint16).reshape(10, 15) + 5000  # bright object
    window = (4000.0, 6000.0)
    near_object = prompt_region(np.array([[10.0, 66.0]]), shape=plane.shape, pad=3)
    assert near_object == (7, 63, 14, 70)
    assert not window_hides_region(plane, (), window, near_object)
    empty = prompt_region(None, [np.array([40.0, 5.0, 30.0, 20.0])], plane.shape, pad=2)
    assert empty == (28, 3, 43, 23)
    assert not window_hides_region(plane, (), window, empty)  # flat background: not hidden
    noisy = plane.astype(np.float32) + np.random.default_rng(1).normal(0, 30, plane.shape)
    assert window_hides_region(noisy, (), window, empty)  # varying values mapped to black


def test_no_prompts_no_region():
    assert prompt_region(None, [], (10, 20)) is None
    assert prompt_region(np.array([[-50.0, -50.0]]), shape=(10, 20), pad=1) is None
