"""One entry shape for every workflow: ``iter_<workflow>(workspace, refs, ...)`` and one call.

The public API (``napari_sam3_onnx.api.__all__``) is the workflows, the workspace, the bundle,
value types and I/O; each name is documented with an example.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from conftest import blob_image, disc
from napari_sam3_onnx import api
from napari_sam3_onnx.engine.encoding import refs_along_axis

ITERATORS = ("iter_propagate", "iter_search", "iter_segment", "iter_segment_all",
             "iter_segment_tracked")


def test_every_public_name_is_documented_with_an_example():
    assert len(api.__all__) == len(set(api.__all__)) <= 25
    for name in api.__all__:
        doc = inspect.getdoc(getattr(api, name)) or ""
        assert "Examples\n--------" in doc, f"api.{name} has no example"


@pytest.mark.parametrize("name", ITERATORS)
def test_every_iterator_takes_a_workspace_and_refs_first_and_a_keyword_cancel(name):
    params = list(inspect.signature(getattr(api, name)).parameters.values())
    assert [p.name for p in params[:2]] == ["workspace", "refs"]
    cancel = inspect.signature(getattr(api, name)).parameters["cancelled"]
    assert cancel.kind is inspect.Parameter.KEYWORD_ONLY and cancel.default is None


def test_iter_segment_answers_each_plane_and_stops_on_cancel(hf_bundle):
    bundle = api.open_bundle(hf_bundle)
    blobs = (((15, 20, 6), (40, 65, 7)), ((18, 24, 6), (42, 60, 7)), ((20, 30, 6),))
    stack = np.stack([blob_image((60, 90), b) for b in blobs])  # (z, rows, cols), z differs
    refs = refs_along_axis(stack, source="s")
    asks = {(0,): {"a": api.Prompt.clicks(np.array([[40, 65]]), None)},
            (1,): {"a": api.Prompt.clicks(np.array([[42, 60]]), None),
                   "bad": api.Prompt.clicks(np.zeros((0, 2)), None,
                                            np.array([30, 30, 30, 30]))}}
    steps = list(api.iter_segment(bundle.workspace(), refs, asks))
    assert [s.index for s in steps] == [(0,), (1,), (2,)] and steps[-1].total == 3
    for step, (r, c) in zip(steps[:2], ((40, 65), (42, 60)), strict=True):
        truth = disc((60, 90), r, c, 7)
        mask = step.masks["a"].mask
        assert mask.shape == (60, 90) and (mask & truth).sum() / (mask | truth).sum() > 0.75
    assert steps[0].problems == [] and len(steps[1].problems) == 1 and "bad" not in steps[1].masks
    assert steps[2].masks == {} and steps[2].problems == []  # a plane without prompts
    seen: list = []
    for step in api.iter_segment(bundle.workspace(), refs, asks,
                                 cancelled=lambda: len(seen) >= 1):
        seen.append(step)
    assert [s.index for s in seen] == [(0,)]
    # the one-call form is the same step on one plane
    one = api.segment(bundle, stack, [[42, 60]], index=(1,))
    np.testing.assert_array_equal(one.mask, steps[1].masks["a"].mask)


def test_one_call_functions_take_a_folder_as_well_as_a_bundle(hf_bundle):
    img = blob_image((60, 90), ((15, 20, 6), (40, 65, 7)))
    by_folder = api.segment(hf_bundle, img, [[15, 20]]).mask
    by_bundle = api.segment(api.open_bundle(hf_bundle), img, [[15, 20]]).mask
    np.testing.assert_array_equal(by_folder, by_bundle)
    assert by_folder.sum() > 0
    with pytest.raises(api.InputError, match="No bundle folder"):
        api.segment("./no/such/folder", img, [[15, 20]])


def test_internal_plumbing_is_not_public():
    for gone in ("make_jobs", "parse_slices", "table_columns", "encode_stack", "StackJob",
                 "iter_search_text", "EmbeddingStore", "TileSettings"):
        assert gone not in api.__all__ and not hasattr(api, gone)
