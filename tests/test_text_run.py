"""The Text tab's parts that need no display: inputs, the search workflow, the output layer."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pytest
from napari.components import ViewerModel
from napari.layers import Image, Shapes

from napari_sam3_onnx._napari.layers import slice_ref
from napari_sam3_onnx._napari.text.inputs import (
    EXEMPLAR,
    long_prompt_warnings,
    phrases,
    plane_exemplars,
    scope_indices,
    set_exemplar_polarity,
)
from napari_sam3_onnx._napari.text.output import TextOutput, summary, target_choices
from napari_sam3_onnx.api.search import iter_search
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import PromptError
from napari_sam3_onnx.testing.scenes import BLOBS, planted_image
from napari_sam3_onnx.testing.tokenizer import build_text_bundle

TOP_LEFT, RIGHT, MID = BLOBS[:3]
PLANTED = ((TOP_LEFT, MID), (RIGHT, MID, TOP_LEFT), (MID,))


def centre(blob):
    return (blob.r0 + blob.r1) // 2, (blob.c0 + blob.c1) // 2


def stack(planted=PLANTED):
    return np.stack([planted_image((60, 90), blobs)[..., 0] for blobs in planted])


@pytest.fixture(scope="module", params=["wkentaro-v0.3", "samexporter"])
def model(request, tmp_path_factory):
    folder = build_text_bundle(tmp_path_factory.mktemp("text") / request.param, request.param)
    adapter = open_adapter(folder)
    return adapter, ClipTokenizer.from_folder(folder), folder


@dataclass
class Run:
    """A search as the Text tab starts one: a workspace, the layer's planes and the options."""

    workspace: Workspace
    refs: list[SliceRef]
    concepts: list[str]
    options: dict = field(default_factory=dict)

    @property
    def texts(self):
        return self.workspace.texts

    @property
    def encoder(self):
        return self.workspace.encoder

    def steps(self, cancel=None, refs=None, **options):
        return iter_search(self.workspace, self.refs if refs is None else refs, self.concepts,
                           **{**self.options, **options},
                           cancelled=None if cancel is None else cancel.is_set)


def make_run(model, data, concepts, tiling=None, **kwargs):
    adapter, _, folder = model
    image = Image(data, contrast_limits=(0, 255))
    refs = [slice_ref(image, (z,), 0) for z in range(len(data))]
    workspace = Workspace(tiling=tiling)
    workspace.attach(adapter, folder)
    return Run(workspace, refs, concepts, kwargs), image


# ---- inputs -------------------------------------------------------------------------------
def test_scope_indices():
    assert scope_indices((), (), "all") == [()]
    assert scope_indices((5,), (3,), "current") == [(3,)]
    assert scope_indices((5,), (3,), "all") == [(0,), (1,), (2,), (3,), (4,)]
    assert scope_indices((5,), (3,), "range", lo=1, hi=9) == [(1,), (2,), (3,), (4,)]
    assert scope_indices((2, 4), (1, 2), "all") == [(0, 2), (1, 2)]
    assert scope_indices((2, 4), (1, 2), "range", axis=1, lo=2, hi=3) == [(1, 2), (1, 3)]
    for bad in ({"mode": "range", "lo": 4, "hi": 2}, {"mode": "all", "axis": 1},
                {"mode": "every"}):
        with pytest.raises(PromptError):
            scope_indices((5,), (3,), **bad)


def test_phrases_and_long_prompts(model):
    assert phrases("nucleus, , cell") == ["nucleus", "cell"]
    assert phrases("  ", have_exemplars=True) == []
    with pytest.raises(PromptError, match="Type at least one concept"):
        phrases(" , ")
    _, tokenizer, _ = model
    assert long_prompt_warnings(tokenizer, ["bright"]) == []
    (msg,) = long_prompt_warnings(tokenizer, ["bright " * 40])
    assert "SAM 3 reads 32" in msg and "cut to" in msg


def test_exemplars_per_plane_with_polarity():
    image = Image(np.zeros((3, 60, 90), np.uint8))
    shapes = Shapes(ndim=3)

    def rect(z, r0, c0, r1, c1):
        shapes.add(np.array([[z, r0, c0], [z, r0, c1], [z, r1, c1], [z, r1, c0]], float),
                   shape_type="rectangle")

    rect(0, 5, 5, 15, 25)  # drawn before any polarity was chosen: positive
    set_exemplar_polarity(shapes, False)
    rect(0, 30, 40, 40, 60)
    rect(2, 1, 2, 3, 4)
    assert list(shapes.features[EXEMPLAR]) == [True, False, False]
    assert shapes.current_edge_color == "magenta"
    found = plane_exemplars(shapes, image, [(0,), (1,), (2,)], slots=8)
    assert sorted(found) == [(0,), (2,)]
    np.testing.assert_allclose(found[(0,)].boxes_rc, [[5, 5, 15, 25], [30, 40, 40, 60]])
    assert found[(0,)].positive.tolist() == [True, False]
    with pytest.raises(PromptError, match="at most 1 exemplar"):
        plane_exemplars(shapes, image, [(0,)], slots=1)


# ---- the run loop -------------------------------------------------------------------------
def test_a_tiled_run_searches_tiles_once_each_and_finds_what_the_whole_plane_shows(model):
    from napari_sam3_onnx.engine.tiling.tiles import TileSettings

    whole, _ = make_run(model, stack(), ["bright"])
    tiles = TileSettings(size=56, overlap=28, threshold=80)  # 60 x 90 planes: 2 x 3 tiles
    tiled, _ = make_run(model, stack(), ["bright"], tiling=tiles)
    encoded = []
    tiled.encoder.listen(on_start=lambda ref: encoded.append((ref.index, ref.region)))
    for a, b in zip(whole.steps(), tiled.steps(), strict=True):
        assert len(a.result.instances) == len(b.result.instances)
        found = [blob for blob in PLANTED[a.index[0]] if a.result.labels[centre(blob)]]
        ids = {int(b.result.labels[centre(blob)]) for blob in found}
        assert 0 not in ids and len(ids) == len(found)  # one object per blob, none cut in two
    assert len(encoded) == len(set(encoded)) == 3 * 6  # each tile of each plane once
    assert all(region is not None for _, region in encoded)  # never the whole plane


def test_run_finds_bright_blobs_on_their_slices_with_unique_ids(model):
    run, _ = make_run(model, stack(), ["bright"], first_id=5)
    done = list(run.steps())
    assert [d.index for d in done] == [(0,), (1,), (2,)] and done[-1].done == done[-1].total == 3
    first, second, third = (d.result for d in done)
    assert first.labels[centre(TOP_LEFT)] == 5 and [i.id for i in first.instances] == [5]
    assert {second.labels[centre(RIGHT)], second.labels[centre(TOP_LEFT)]} == {6, 7}
    assert not third.labels.any() and not third.instances
    assert all(not d.result.labels[centre(MID)] for d in done)
    scores = [i.score for i in second.instances]
    assert scores == sorted(scores, reverse=True) and all(s > 0.5 for s in scores)
    baked = model[0].layout.startswith("wkentaro")
    assert {d.min_score for d in done} == {0.5 if baked else 0.0}
    assert run.texts.calls == 1 and run.encoder.encoder_calls == 3


def test_language_encoder_once_and_cancel_keeps_finished_planes(model):
    run, _ = make_run(model, stack([(TOP_LEFT,)] * 10), ["bright", "thing"])
    cancel = threading.Event()
    done = []
    for step in run.steps(cancel):
        done.append(step)
        if len(done) == 4:
            cancel.set()
    assert [d.index for d in done] == [(0,), (1,), (2,), (3,)]
    assert run.texts.calls == 2 and run.encoder.encoder_calls == 4  # once per phrase
    run.concepts = ["bright"]
    list(run.steps(refs=run.refs[:6]))
    assert run.texts.calls == 2 and run.encoder.encoder_calls == 6  # cached phrase and planes


# ---- the output ---------------------------------------------------------------------------
def test_new_layer_gets_planes_and_a_features_row_per_instance(model):
    viewer = ViewerModel()
    run, image = make_run(model, stack(), ["bright"])
    image.scale, image.translate = (2.0, 0.5, 0.25), (1.0, 2.0, 3.0)
    viewer.add_layer(image)
    out = TextOutput(viewer, image, None, ["bright"])
    assert out.layer.name == "SAM text: bright" and out.first_id == 1
    np.testing.assert_allclose(out.layer.scale, image.scale)
    for step in run.steps():
        assert out.add(step.index, step.result)
    written = out.finish()
    table = out.layer.features
    assert table["index"].tolist() == [i.id for i in written] == [1, 2, 3]
    assert table["index_0"].tolist() == [0, 1, 1]
    for row in table.itertuples():
        assert (out.layer.data[row.index_0] == row.index).sum() == row.area_px
    # the instances lie on 2 of the 3 slices searched
    assert "3 instance(s) of bright on 2 slice(s) (3 searched)" in summary(
        out, written, 3, ["bright"], 0.5)
    assert target_choices(viewer, image) == [out.layer]


def test_existing_layer_one_undo_step_and_user_pixels_kept(model):
    viewer = ViewerModel()
    run, image = make_run(model, stack(), ["bright"])
    viewer.add_layer(image)
    user = np.zeros((3, 60, 90), np.int32)
    user[1, TOP_LEFT.r0:TOP_LEFT.r1, TOP_LEFT.c0:TOP_LEFT.c0 + 5] = 4
    mine = viewer.add_labels(user.copy(), features={"kind": ["", "", "", "", "mine"]})
    out = TextOutput(viewer, image, mine, ["bright"])
    assert out.first_id == 5
    for step in run.steps(first_id=out.first_id):
        out.add(step.index, step.result)
    assert (mine.data == user).all()  # nothing written before the run ends
    mine.data[2, 0, 0] = 9  # the user paints meanwhile: the run's ids move above it
    written = out.finish()
    assert [i.id for i in written] == [10, 11, 12]
    assert (mine.data[user == 4] == 4).all()
    assert "other objects (id 4) on 1 slice(s) were kept" in summary(out, written, 3, ["bright"],
                                                                      0.5)  # said, not silent
    top_left = mine.data[1][centre(TOP_LEFT)]
    assert next(i.area for i in written if i.id == top_left) == (mine.data[1] == top_left).sum()
    table = mine.features
    assert table["index"].tolist() == [0, 1, 2, 3, 4, 10, 11, 12]
    assert table["kind"].tolist()[4] == "mine"
    mine.undo()
    expected = user.copy()
    expected[2, 0, 0] = 9
    np.testing.assert_array_equal(mine.data, expected)
    assert "One undo" in summary(out, written, 3, ["bright"], 0.5)


def test_empty_new_layer_is_dropped(model):
    viewer = ViewerModel()
    run, image = make_run(model, stack(), ["nothing"])
    viewer.add_layer(image)
    out = TextOutput(viewer, image, None, ["nothing"])
    for step in run.steps():
        out.add(step.index, step.result)
    assert out.finish() == []
    msg = summary(out, [], 5, ["nothing"], 0.5)
    assert "Cancelled after 3 of 5" in msg and "No instance of nothing" in msg
    assert out.layer not in viewer.layers
