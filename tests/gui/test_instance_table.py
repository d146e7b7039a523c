"""The instance table of a text run is the same from the dock and from the command line.

One schema (``api/instance_table.py``) makes both the labels layer's ``features`` in the dock and
the CSV of ``napari-sam3-onnx text --table``: same columns, dtypes, decimals and values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tifffile

pytest.importorskip("onnx")

from napari_sam3_onnx._napari.features import table_of
from napari_sam3_onnx._napari.launch import PLUGIN, WIDGET
from napari_sam3_onnx._napari.layers import contrast_window
from napari_sam3_onnx.api import instance_table
from napari_sam3_onnx.api.bundles import resolve_bundle
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.automatic.linking import LINK_IOU


def test_a_text_run_tables_alike_in_the_dock_and_the_cli(make_napari_viewer, qtbot, tmp_path):
    viewer = make_napari_viewer()
    viewer.open_sample(PLUGIN, "synthetic_nuclei")
    image = viewer.layers[0]
    _dock, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGET)
    widget.model.load_toy()
    panel = widget.panels["Text"]
    panel.scope.set_mode("all")
    panel.concepts.setText("nucleus")
    assert panel.link.isChecked() and panel.min_size.value() == 0
    panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    dock = table_of(viewer.layers[-1]).reset_index(drop=True)
    assert len(dock) > 6 and dock["index_0"].nunique() > 1  # several planes of a stack

    path = tmp_path / "nuclei.tif"
    tifffile.imwrite(path, np.asarray(image.data))
    lo, hi = contrast_window(image)
    assert main(["text", str(resolve_bundle("toy")), str(path), "--concepts", "nucleus",
                 "--out", str(tmp_path / "labels.tif"), "--table", str(tmp_path / "t.csv"),
                 "--window", repr(lo), repr(hi), "--link-iou", str(LINK_IOU), "-q"]) == 0
    n_lead = image.ndim - 2
    cli = pd.read_csv(tmp_path / "t.csv", keep_default_na=False,
                      dtype=instance_table.dtypes("text", n_lead))
    assert list(dock.columns) == list(cli.columns) == instance_table.columns("text", n_lead)
    pd.testing.assert_frame_equal(dock, cli, check_exact=True)
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "labels.tif"),
                                  np.asarray(viewer.layers[-1].data))
