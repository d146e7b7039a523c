import numpy as np
import pytest

from napari_sam3_onnx.engine.slices import extract_plane, plane_to_rgb, window_to_uint8


def test_window_maps_limits_to_0_and_255():
    x = np.array([[100, 150, 200, 250, 50]], np.uint16)
    out = window_to_uint8(x, (100, 200))
    np.testing.assert_array_equal(out, [[0, 128, 255, 255, 0]])


def test_flat_window():
    out = window_to_uint8(np.array([1.0, 2.0, 3.0]), (2.0, 2.0))
    np.testing.assert_array_equal(out, [0, 255, 255])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.int32])
def test_gray_plane_to_rgb(dtype):
    plane = np.zeros((5, 7), dtype)
    plane[1, 4] = 40
    rgb = plane_to_rgb(plane, (0, 40))
    assert rgb.shape == (5, 7, 3) and rgb.dtype == np.uint8
    assert (rgb[1, 4] == 255).all() and rgb.sum() == 3 * 255


def test_uint8_without_window_is_unchanged():
    plane = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.testing.assert_array_equal(plane_to_rgb(plane)[..., 1], plane)


def test_float_without_window_uses_min_max():
    plane = np.array([[-1.0, 0.0, 3.0]], np.float32)
    np.testing.assert_array_equal(plane_to_rgb(plane)[0, :, 0], [0, 64, 255])


def test_rgb_passes_through_and_drops_alpha():
    rgba = np.random.default_rng(0).integers(0, 255, (4, 6, 4), dtype=np.uint8)
    out = plane_to_rgb(rgba, rgb=True)
    np.testing.assert_array_equal(out, rgba[..., :3])
    rgb16 = (rgba[..., :3].astype(np.uint16) * 10)
    out16 = plane_to_rgb(rgb16, (0, 2550), rgb=True)
    np.testing.assert_array_equal(out16, rgba[..., :3])


def test_extract_plane_2d_3d_4d_rgb():
    d2 = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(extract_plane(d2, ()), d2)
    d3 = np.arange(4 * 5 * 6).reshape(4, 5, 6)
    np.testing.assert_array_equal(extract_plane(d3, (2,)), d3[2])
    d4 = np.arange(3 * 4 * 5 * 6).reshape(3, 4, 5, 6)
    np.testing.assert_array_equal(extract_plane(d4, (1, 3)), d4[1, 3])
    rgb3 = np.zeros((4, 5, 6, 3))
    assert extract_plane(rgb3, (2,), rgb=True).shape == (5, 6, 3)
    with pytest.raises(ValueError, match="leading"):
        extract_plane(d3, ())
    with pytest.raises(IndexError):
        extract_plane(d3, (4,))
