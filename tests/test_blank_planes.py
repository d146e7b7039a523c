"""Blank planes (zero padding, empty mask images) map to black and give the models nothing."""

from __future__ import annotations

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.engine.slices import plane_to_rgb
from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03


@pytest.mark.parametrize(
    "plane",
    [
        np.zeros((37, 53), np.uint16),
        np.full((37, 53), 4095, np.uint16),
        np.full((37, 53), -3.5e30, np.float32),
        np.zeros((37, 53), bool),
    ],
    ids=["zero-uint16", "constant-uint16", "huge-float", "all-false-bool"],
)
def test_a_constant_plane_with_the_default_window_is_black(plane):
    rgb = plane_to_rgb(plane)
    assert rgb.shape == (37, 53, 3) and rgb.dtype == np.uint8
    assert not rgb.any()


def test_a_bool_plane_maps_false_to_black_and_true_to_white():
    mask = np.zeros((20, 31), bool)
    mask[3:9, 17:29] = True
    rgb = plane_to_rgb(mask)
    assert (rgb[mask] == 255).all() and not rgb[~mask].any()


def test_a_zero_slice_in_a_stack_is_black_with_the_default_window():
    stack = np.zeros((3, 40, 70), np.uint16)
    stack[0, 5:15, 10:30] = 900
    stack[2, 20:30, 40:60] = 1200
    assert not plane_to_rgb(stack[1]).any()
    assert plane_to_rgb(stack[0])[5, 10, 0] == 255 and plane_to_rgb(stack[0])[0, 0, 0] == 0


def test_a_click_on_a_black_image_gives_an_empty_mask(hf_bundle):
    bundle = api.open_bundle(hf_bundle)
    black = np.zeros((64, 97), np.uint16)
    res = api.segment(bundle, black, [[30, 61]])
    assert res.mask.shape == (64, 97)
    assert res.mask.sum() == 0
    lit = black.copy()
    lit[20:40, 50:75] = 700  # the same click on a bright patch does give a mask
    assert api.segment(bundle, lit, [[30, 61]]).mask[30, 61]


def test_text_search_finds_nothing_on_the_blank_slices_of_a_stack(tmp_path):
    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    bundle = api.open_bundle(folder)
    gray = planted_image()[..., 0].astype(np.uint16) * 16  # (60, 90), blobs on a gradient
    zeros = np.zeros_like(gray)
    stack = np.stack([gray, zeros, gray[:, ::-1], zeros, gray[::-1]])
    res = api.search_text(bundle, stack, "bright")
    per_slice = {}
    for row in res.rows:
        per_slice[row["index_0"]] = per_slice.get(row["index_0"], 0) + 1
    assert res.searched == 5
    assert set(per_slice) == {0, 2, 4}, per_slice
    assert per_slice[0] == per_slice[2] == per_slice[4] > 0
    assert not res.labels[1].any() and not res.labels[3].any()


@pytest.mark.parametrize(
    ("plane", "window", "rgb"),
    [
        (np.ones((37, 53), bool), None, False),
        (np.full((37, 53), 255, np.uint8), None, False),
        (np.full((37, 53), 4000, np.uint16), (500.0, 26000.0), False),
        (np.full((37, 53, 3), (255, 0, 0), np.uint8), None, True),
    ],
    ids=["all-true-bool", "white-uint8", "grey-in-a-window", "all-red-rgb"],
)
def test_a_constant_plane_is_black_whatever_its_value(plane, window, rgb):
    assert not plane_to_rgb(plane, window, rgb=rgb).any()


def test_an_all_true_mask_among_blank_planes_gives_no_instance(tmp_path):
    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    bundle = api.open_bundle(folder)
    stack = np.zeros((4, 60, 90), bool)
    stack[2] = True
    labels = api.search_text(bundle, stack, "nucleus").labels
    assert labels.shape == (4, 60, 90) and not labels.any()
