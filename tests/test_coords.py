import numpy as np

from napari_sam3_onnx.engine import coords


def test_rc_to_xy_scales_axes_separately():
    xy = coords.rc_to_model_xy(np.array([[30, 45]]), (60, 90), (84, 84))
    np.testing.assert_allclose(xy, [[45 * 84 / 90, 30 * 84 / 60]])


def test_box_normalisation():
    np.testing.assert_array_equal(
        coords.normalise_box_rc([50, 80, 10, 20], (60, 90)), [10, 20, 50, 80]
    )
    np.testing.assert_array_equal(
        coords.normalise_box_rc([-5, -10, 30, 200], (60, 90)), [0, 0, 30, 89]
    )
    assert coords.normalise_box_rc([10, 10, 10, 40], (60, 90)) is None  # zero height
    assert coords.normalise_box_rc([70, 0, 80, 10], (60, 90)) is None  # below the image


def test_box_points_and_cxcywh():
    pts = coords.box_rc_to_model_points([10, 20, 50, 80], (60, 90), (84, 168))
    np.testing.assert_allclose(pts, [[20 * 168 / 90, 10 * 84 / 60], [80 * 168 / 90, 50 * 84 / 60]])
    np.testing.assert_allclose(
        coords.box_rc_to_cxcywh([10, 20, 50, 80], (60, 90)),
        [50 / 90, 30 / 60, 60 / 90, 40 / 60], rtol=1e-6,
    )


def test_inside():
    got = coords.inside(np.array([[0, 0], [59.4, 89.4], [59.6, 10], [-1, 5]]), (60, 90))
    np.testing.assert_array_equal(got, [True, True, False, False])
