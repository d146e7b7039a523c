import numpy as np
import onnx
import pytest

from napari_sam3_onnx.models.errors import CorruptModelError, ModelFileMissingError
from napari_sam3_onnx.models.graph_info import check_external_data, read_signature
from napari_sam3_onnx.testing.builder import GraphBuilder


def _onnx_io(path):
    m = onnx.load(str(path), load_external_data=False)
    init = {i.name for i in m.graph.initializer}

    def dims(v):
        return tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in v.type.tensor_type.shape.dim
        )

    ins = [(v.name, dims(v)) for v in m.graph.input if v.name not in init]
    outs = [(v.name, dims(v)) for v in m.graph.output]
    return ins, outs


def test_signature_matches_onnx_loader(hf_bundle):
    for name in ("vision_encoder.onnx", "prompt_encoder_mask_decoder.onnx"):
        sig = read_signature(hf_bundle / name)
        ins, outs = _onnx_io(hf_bundle / name)
        assert [(t.name, t.shape) for t in sig.inputs] == ins
        assert [(t.name, t.shape) for t in sig.outputs] == outs
    dec = read_signature(hf_bundle / "prompt_encoder_mask_decoder.onnx")
    assert dec.input("input_labels").dtype == "int64"
    assert dec.input("input_points").shape == (1, 1, "num_points", 2)
    assert dec.output("pred_masks").shape == (1, 1, 3, 24, 24)


def test_external_data_is_listed(hf_bundle):
    sig = read_signature(hf_bundle / "vision_encoder.onnx")
    assert {r.location for r in sig.external} == {"vision_encoder.onnx_data"}
    check_external_data(sig)  # intact bundle: no error


def test_initializers_listed_as_inputs_are_excluded(tmp_path):
    b = GraphBuilder("g")
    x = b.input("x", "float32", [2, 3])
    w = b.const(np.ones((2, 3), np.float32), name="w")
    b.output(b.Add(x, w), "y", "float32", [2, 3])
    model = b.model()
    model.graph.input.append(onnx.helper.make_tensor_value_info("w", 1, [2, 3]))  # old-IR style
    onnx.save(model, str(tmp_path / "g.onnx"))
    sig = read_signature(tmp_path / "g.onnx")
    assert [t.name for t in sig.inputs] == ["x"]
    assert sig.output_names == {"y"}


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileMissingError, match="not found"):
        read_signature(tmp_path / "nope.onnx")


@pytest.mark.parametrize("keep", [0, 10, 200])
def test_truncated_file_is_reported(hf_bundle, tmp_path, keep):
    data = (hf_bundle / "prompt_encoder_mask_decoder.onnx").read_bytes()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(data[:keep])
    with pytest.raises(CorruptModelError, match="damaged"):
        read_signature(bad)


def test_not_onnx_is_reported(tmp_path):
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"<html>404 not found</html>\n" * 20)
    with pytest.raises(CorruptModelError):
        read_signature(bad)


def test_truncated_external_data(hf_bundle, tmp_path):
    import shutil

    for p in hf_bundle.iterdir():
        shutil.copy(p, tmp_path / p.name)
    data = tmp_path / "vision_encoder.onnx_data"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(CorruptModelError, match="needs"):
        check_external_data(read_signature(tmp_path / "vision_encoder.onnx"))
    data.unlink()
    with pytest.raises(ModelFileMissingError, match="beside it"):
        check_external_data(read_signature(tmp_path / "vision_encoder.onnx"))
