"""Refining existing labels and tiled planes run the precision their workflow is granted.

On a per-workflow bundle of the suite's toy ``nso-sam3`` graphs (int8 image encoder beside the
fp32 one): refining a label is a clicks/boxes request, a tiled text search a text request, a
tiled click a clicks request; each must run the encoder file the manifest grants that workflow
(and, on "OpenVINO CPU bf16", the arithmetic its bf16 verdict grants). What ran is read from
the sessions that ran: the int8 and fp32 files have different names.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from conftest import blob_image, disc
from napari_sam3_onnx import api
from napari_sam3_onnx.api.clicks import segment_object
from napari_sam3_onnx.api.search import iter_search
from napari_sam3_onnx.api.workspace import Workspace
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.runtime import LazySession, RuntimeConfig
from test_workflow_precision import VERDICTS, _per_workflow

SHAPE = (70, 110)  # asymmetric
CELL = (40, 70, 10)
INT8, FP32 = "image_encoder.int8.onnx", "image_encoder.onnx"
#: Text passes int8 here, so a tiled text search that fell back to the default (fp32)
#: encoder would be seen.
TEXT_INT8 = {**VERDICTS, "text": True}
#: Tiles of 48 px on the 110-px-wide plane (more than one tile each way).
TILES = TileSettings(size=48, overlap=16, threshold=60)


@pytest.fixture
def ran(monkeypatch):
    """Every image-encoder run as ``(file, OpenVINO precision or None)``, in call order."""
    calls: list[tuple[str, str | None]] = []
    real = LazySession.run

    def run(self, outputs, feeds):
        if self.path.name.startswith("image_encoder"):
            calls.append((self.path.name, self.config.openvino))
        return real(self, outputs, feeds)

    monkeypatch.setattr(LazySession, "run", run)
    return calls


def _image() -> np.ndarray:
    return np.stack([blob_image(SHAPE, ((*CELL[:2], CELL[2]), (15, 20, 6)))] * 2)


def _labels() -> np.ndarray:
    lab = np.zeros((2, *SHAPE), np.int32)
    lab[1][disc(SHAPE, *CELL[:2], CELL[2]) & (np.arange(SHAPE[1])[None, :] <= CELL[1])] = 5
    return lab


def test_refining_a_label_runs_the_clicks_grant(tmp_path, ran):
    _, out = _per_workflow(tmp_path)  # clicks int8, text fp32
    bundle = api.open_bundle(out)
    api.refine(bundle, _image(), _labels(), 5, [[CELL[0], CELL[1] + 6]], [1], index=(1,))
    assert [f for f, _ in ran] == [INT8]


def test_a_tiled_text_search_runs_the_text_grant(tmp_path, ran):
    _, out = _per_workflow(tmp_path, TEXT_INT8)
    ws = Workspace(tiling=TILES)
    ws.attach(open_adapter(out), out)
    ref = SliceRef(_image(), (1,), source="stack")
    list(iter_search(ws, [ref], ["cell"]))
    assert len(ran) > 1 and {f for f, _ in ran} == {INT8}  # every tile, int8


def test_a_tiled_exemplar_search_runs_the_exemplars_grant(tmp_path, ran):
    from napari_sam3_onnx.engine.concepts.search import Exemplars

    _, out = _per_workflow(tmp_path, TEXT_INT8)  # exemplars fp32
    ws = Workspace(tiling=TILES)
    ws.attach(open_adapter(out), out)
    ref = SliceRef(_image(), (1,), source="stack")
    boxes = Exemplars(np.array([[30.0, 60.0, 50.0, 80.0]]), np.array([True]))
    list(iter_search(ws, [ref], [], exemplars={(1,): boxes}))
    assert ran and {f for f, _ in ran} == {FP32}


def test_a_click_on_a_tiled_plane_runs_the_clicks_grant(tmp_path, ran):
    _, out = _per_workflow(tmp_path, {**VERDICTS, "clicks": False, "text": True})
    ws = Workspace(tiling=TILES)
    encoder = ws.attach(open_adapter(out), out)
    ref = SliceRef(_image(), (1,), source="stack")
    segment_object(encoder, ref, Prompt.clicks(np.array([[40.0, 70.0]]), [1]), tiling=TILES)
    assert ran and {f for f, _ in ran} == {FP32}  # clicks failed int8 here


@pytest.mark.parametrize("clicks", [True, False])
def test_refining_a_label_on_bf16_follows_the_clicks_bf16_verdict(tmp_path, ran, clicks):
    pytest.importorskip("openvino")
    from test_bf16_per_workflow import _record
    from test_workflow_precision import _fp32

    folder = _fp32(tmp_path / "fp32")
    _record(folder, {**dict.fromkeys(VERDICTS, not clicks), "clicks": clicks})
    bundle = api.open_bundle(folder, providers="OpenVINO CPU bf16")
    api.refine(bundle, _image(), _labels(), 5, [[CELL[0], CELL[1] + 6]], [1], index=(1,))
    assert ran == [(FP32, "bf16" if clicks else "f32")]


def test_a_tiled_text_search_on_bf16_follows_the_text_bf16_verdict(tmp_path, ran):
    pytest.importorskip("openvino")
    from test_bf16_per_workflow import _record
    from test_workflow_precision import _fp32

    folder = _fp32(tmp_path / "fp32")
    _record(folder, {**dict.fromkeys(VERDICTS, False), "text": True})
    ws = Workspace(tiling=TILES)
    ws.attach(open_adapter(folder, RuntimeConfig(providers="OpenVINO CPU bf16")), folder)
    list(iter_search(ws, [SliceRef(_image(), (1,), source="stack")], ["cell"]))
    assert len(ran) > 1 and set(ran) == {(FP32, "bf16")}
