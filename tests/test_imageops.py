import numpy as np
import pytest
from skimage.transform import resize

from napari_sam3_onnx.models.imageops import resample_matrix, resize_bilinear, resize_rgb_uint8


def test_upsampling_equals_bilinear_align_corners_false():
    rng = np.random.default_rng(0)
    a = rng.random((7, 11)).astype(np.float32)
    ours = resize_bilinear(a, (13, 23), antialias=False)
    ref = resize(a, (13, 23), order=1, mode="edge", anti_aliasing=False)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_downsampling_preserves_constant_and_mean():
    ones = np.full((50, 30, 3), 7.0)
    out = resize_bilinear(ones, (8, 9))
    assert out.shape == (8, 9, 3)
    np.testing.assert_allclose(out, 7.0, rtol=1e-5)
    rng = np.random.default_rng(1)
    img = rng.random((120, 80)).astype(np.float32)
    assert abs(resize_bilinear(img, (30, 20)).mean() - img.mean()) < 0.01


def test_antialias_keeps_a_thin_line_visible():
    img = np.zeros((100, 100), np.float32)
    img[:, 51] = 1.0  # one-pixel line, between the samples of a naive 10x decimation
    assert resize_bilinear(img, (10, 10), antialias=True).max() > 0.02
    assert resize_bilinear(img, (10, 10), antialias=False).max() == pytest.approx(0.0)


def test_rows_and_cols_are_not_swapped():
    img = np.zeros((40, 100), np.float32)
    img[5:10, 80:95] = 1  # top right
    out = resize_bilinear(img, (20, 10))
    r, c = np.unravel_index(np.argmax(out), out.shape)
    assert r < 5 and c >= 8


def test_rows_sum_to_one():
    m = resample_matrix(17, 5)
    np.testing.assert_allclose(np.asarray(m.sum(axis=1)).ravel(), 1.0, rtol=1e-6)


def test_rgb_uint8_roundtrip_and_identity():
    rgb = (np.arange(6 * 4 * 3) % 256).astype(np.uint8).reshape(6, 4, 3)
    assert resize_rgb_uint8(rgb, (6, 4)) is not None
    np.testing.assert_array_equal(resize_rgb_uint8(rgb, (6, 4)), rgb)
    assert resize_rgb_uint8(rgb, (12, 8)).dtype == np.uint8
