"""Clicks and rectangles -> one prompt per object, and logits feedback (no napari)."""

from __future__ import annotations

import numpy as np

from napari_sam3_onnx.api.prompts import (
    ObjectPrompt,
    box_from_corners,
    group_objects,
    with_feedback,
)
from napari_sam3_onnx.engine.interactive import ObjectMask, Prompt


def test_box_from_corners_in_any_order_and_zero_size_is_no_box():
    corners = [[12.5, 40.0], [3.0, 40.0], [3.0, 7.25], [12.5, 7.25]]
    np.testing.assert_array_equal(box_from_corners(corners), [3.0, 7.25, 12.5, 40.0])
    assert box_from_corners([[4.0, 9.0]] * 4) is None
    np.testing.assert_array_equal(box_from_corners([[4, 9], [4, 11]]), [4, 9, 4, 11])  # a line


def test_clicks_alone_are_one_object_and_nothing_is_nothing():
    assert group_objects(np.zeros((0, 2)), np.zeros(0, int), []) == []
    (obj,) = group_objects([[1, 2], [3, 4]], np.array([1, 0]), [])
    assert obj.key == () and obj.prompt.box_rc is None
    np.testing.assert_array_equal(obj.prompt.labels, [1, 0])


def test_clicks_refine_the_box_that_contains_them_else_the_last_box():
    boxes = [np.array([0, 0, 10, 10.0]), np.array([20, 20, 30, 30.0])]
    objs = group_objects([[5, 5], [25, 25], [50, 50]], np.array([1, 0, 1]), boxes)
    assert len(objs) == 2
    np.testing.assert_array_equal(objs[0].prompt.points_rc, [[5, 5]])
    np.testing.assert_array_equal(objs[1].prompt.points_rc, [[25, 25], [50, 50]])
    np.testing.assert_array_equal(objs[1].prompt.box_rc, boxes[1])


def _result(tag):
    return ObjectMask(np.zeros((2, 2), bool), np.full((4, 4), tag, np.float32), 0.9, 1.0, 0)


def test_feedback_only_when_the_new_prompt_extends_the_old():
    old = Prompt.clicks([[1, 1]], [1])
    previous = {(): (old, _result(3.0))}
    extended = ObjectPrompt((), Prompt.clicks([[1, 1], [2, 2]], [1, 0]))
    assert with_feedback(extended, previous).mask_logits[0, 0] == 3.0
    moved = ObjectPrompt((), Prompt.clicks([[1, 2], [2, 2]], [1, 0]))
    assert with_feedback(moved, previous).mask_logits is None
    same = ObjectPrompt((), old)
    assert with_feedback(same, previous).mask_logits is None
    other_box = ObjectPrompt((0, 0, 5, 5), Prompt.clicks([[1, 1], [2, 2]], [1, 0]))
    assert with_feedback(other_box, previous).mask_logits is None
