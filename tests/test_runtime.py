import numpy as np
import pytest

from napari_sam3_onnx.models.errors import CorruptModelError
from napari_sam3_onnx.models.runtime import LazySession, RuntimeConfig, resolve_providers


def test_auto_always_has_cpu():
    assert resolve_providers("auto")[-1] == "CPUExecutionProvider"


def test_unavailable_provider_falls_back_to_cpu_with_warning():
    with pytest.warns(RuntimeWarning, match="not available"):
        assert resolve_providers(["NoSuchExecutionProvider"]) == ["CPUExecutionProvider"]
    assert resolve_providers("cpu") == ["CPUExecutionProvider"]


def test_session_is_lazy_and_runs_only_requested_outputs(hf_bundle):
    sess = LazySession(hf_bundle / "vision_encoder.onnx", RuntimeConfig(providers="cpu"))
    assert not sess.loaded
    assert sess.signature.input("pixel_values").shape == (1, 3, 84, 84)
    out = sess.run(["image_embeddings.2"], {"pixel_values": np.zeros((1, 3, 84, 84), np.float32),
                                            "unused": np.zeros(1)})
    assert sess.loaded and list(out) == ["image_embeddings.2"]
    assert out["image_embeddings.2"].shape == (1, 4, 6, 6)
    with pytest.raises(ValueError, match="missing inputs"):
        sess.run(["image_embeddings.2"], {})


@pytest.mark.parametrize("level", ["all", "extended", "basic", "disable"])
def test_optimisation_levels(hf_bundle, level):
    sess = LazySession(hf_bundle / "vision_encoder.onnx", RuntimeConfig(graph_optimization=level))
    x = np.full((1, 3, 84, 84), 1.0, np.float32)
    out = sess.run(["image_embeddings.0"], {"pixel_values": x})["image_embeddings.0"]
    np.testing.assert_allclose(out[0, 0], 1.0, rtol=1e-5)  # white image -> brightness 1


def test_corrupt_weights_give_a_clear_error(hf_bundle, tmp_path):
    import shutil

    for p in hf_bundle.iterdir():
        shutil.copy(p, tmp_path / p.name)
    onnx_file = tmp_path / "vision_encoder.onnx"
    blob = onnx_file.read_bytes()
    # damage bytes inside the graph: either the header reader or onnxruntime must refuse it
    onnx_file.write_bytes(blob[:40] + b"\xff" * 30 + blob[70:])
    with pytest.raises(CorruptModelError):
        LazySession(onnx_file).session  # noqa: B018
