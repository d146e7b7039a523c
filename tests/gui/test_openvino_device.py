"""The dock's device menu runs the model through OpenVINO (where ``openvino`` is installed)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openvino")
pytest.importorskip("onnx")

from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.engine.encoding import SliceRef
from napari_sam3_onnx.models.openvino_runtime import OpenVinoSession

from .gui_helpers import blob_stack

pytestmark = pytest.mark.gui


def test_choosing_openvino_reloads_the_model_on_it_and_says_so(make_napari_viewer, open_widget,
                                                               tmp_path):
    toy = resolve_bundle("toy", tmp_path / "home")
    stack, _truth, _centre = blob_stack()
    viewer = make_napari_viewer()
    viewer.add_image(stack, name="blobs", contrast_limits=(0, 3000))
    w = open_widget(viewer)
    w.model.load(toy, toy=True)
    assert "OpenVINO CPU" in [w.model.device.itemText(i) for i in range(w.model.device.count())]
    w.model.device.setCurrentText("OpenVINO CPU")  # the menu's own signal reloads the model
    assert w.model.info.text().split("<br>")[0].endswith("· OpenVINO CPU")
    adapter = w.model.adapter
    emb = w.workspace.encoder.embed(SliceRef(stack, (1,), window=(0, 3000)))
    assert isinstance(adapter.encoder.session, OpenVinoSession)
    assert all(np.isfinite(v).all() for v in emb.features.values())
