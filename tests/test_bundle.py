import shutil

import pytest

from napari_sam3_onnx.cli import main
from napari_sam3_onnx.models.base import Capability
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import ModelFileMissingError, UnknownLayoutError
from napari_sam3_onnx.testing.hf_tracker import DECODER, ENCODER


def test_recognises_from_graphs_not_file_names(hf_bundle, tmp_path):
    shutil.copy(hf_bundle / ENCODER, tmp_path / "a.onnx")
    shutil.copy(hf_bundle / (ENCODER + "_data"), tmp_path / (ENCODER + "_data"))
    shutil.copy(hf_bundle / DECODER, tmp_path / "b.onnx")
    adapter = open_adapter(tmp_path)
    assert adapter.layout == "hf-tracker"
    assert adapter.has(Capability.CLICKS) and not adapter.has(Capability.TEXT)
    assert adapter.input_size == (84, 84) and adapter.mask_size == (24, 24)


def test_unknown_layout_names_what_was_found(hf_bundle, tmp_path):
    shutil.copy(hf_bundle / DECODER, tmp_path / DECODER)
    with pytest.raises(UnknownLayoutError) as err:
        open_adapter(tmp_path)
    assert "input_points" in str(err.value) and DECODER in str(err.value)


def test_missing_folder(tmp_path):
    with pytest.raises(ModelFileMissingError):
        open_adapter(tmp_path / "nowhere")


def test_cli_inspect_and_errors(hf_bundle, tmp_path, capsys):
    assert main(["inspect", str(hf_bundle)]) == 0
    out = capsys.readouterr().out
    assert "hf-tracker" in out and "84 x 84" in out and "clicks" in out
    assert main(["inspect", str(tmp_path)]) == 1
    assert "match no known" in capsys.readouterr().err
    assert main(["doctor"]) == 0
    assert "CPUExecutionProvider" in capsys.readouterr().out
