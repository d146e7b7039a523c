"""OpenVINO backend: every workflow on the toy bundle through OpenVINO's CPU runtime (f32) gives
onnxruntime's answers, graph output by graph output within 1e-4, and the same masks.

Skipped where ``openvino`` is not installed (it is the optional ``[openvino]`` extra).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.engine.automatic import AutoMaskSettings
from napari_sam3_onnx.engine.concepts.search import Exemplars
from napari_sam3_onnx.models.runtime import LazySession, device_label, resolve_providers
from napari_sam3_onnx.samples.synthetic import synthetic_nuclei
from napari_sam3_onnx.testing.automatic import build_sloped_tracker
from napari_sam3_onnx.testing.geometry import TestGeometry

ov = pytest.importorskip("openvino")

from napari_sam3_onnx.models.openvino_runtime import OpenVinoSession  # noqa: E402

MID = 6
ONNXRUNTIME, OPENVINO = "cpu", "OpenVINO CPU"


@pytest.fixture(scope="module")
def toy_folder(tmp_path_factory):
    return api.open_bundle("toy", root=tmp_path_factory.mktemp("home")).folder


@pytest.fixture(scope="module")
def sample():
    image, truth = synthetic_nuclei(shape=(8, 150, 210))  # (z, rows, cols) uint16, asymmetric
    return image, truth, (float(image.min()), float(image.max()))


@pytest.fixture
def recorder(monkeypatch):
    """Every graph run as ``(graph file, {output: array})``, in call order."""
    calls: list[tuple[str, dict[str, np.ndarray]]] = []
    real = LazySession.run

    def run(self, outputs, feeds):
        out = real(self, outputs, feeds)
        calls.append((self.path.name, {k: np.array(v) for k, v in out.items()}))
        return out

    monkeypatch.setattr(LazySession, "run", run)
    return calls


def _on_both(folder, recorder, workflow, tmp_path):
    """Run ``workflow(bundle)`` on onnxruntime then OpenVINO; return both results and calls."""
    results, recorded = [], []
    for device in (ONNXRUNTIME, OPENVINO):
        bundle = api.open_bundle(folder, providers=device)
        recorder.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no silent fallback to onnxruntime
            results.append(workflow(bundle))
        recorded.append(list(recorder))
        sessions = [s for s in vars(bundle.adapter).values() if isinstance(s, LazySession)]
        loaded = [s for s in sessions if s.loaded]
        assert loaded, "no graph ran"
        for s in loaded:
            assert s.fallback is None
            assert isinstance(s.session, OpenVinoSession) == (device == OPENVINO), s.path.name
    ort_calls, ov_calls = recorded
    assert [name for name, _ in ov_calls] == [name for name, _ in ort_calls]
    assert ort_calls, "the workflow ran no graph"
    for (name, ours), (_, theirs) in zip(ov_calls, ort_calls, strict=True):
        assert ours.keys() == theirs.keys(), name
        for key, want in theirs.items():
            got = ours[key]
            assert got.shape == want.shape and got.dtype == want.dtype, (name, key)
            if want.dtype.kind == "f":
                scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale,
                                           err_msg=f"{name}:{key}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{name}:{key}")
    return results


def _centre(mask):
    rr, cc = np.nonzero(mask)
    return [round(float(rr.mean())), round(float(cc.mean()))]


def test_openvino_devices_are_named_and_fall_back_to_the_cpu_provider():
    assert resolve_providers("OpenVINO CPU") == ["CPUExecutionProvider"]
    assert resolve_providers("openvino-bf16") == ["CPUExecutionProvider"]
    assert device_label("openvino") == "OpenVINO CPU"
    assert device_label("OpenVINO CPU bf16") == "OpenVINO CPU bf16"
    assert device_label("cpu") == "CPUExecutionProvider"


def test_clicks_and_boxes_match_onnxruntime(toy_folder, sample, recorder, tmp_path):
    image, truth, window = sample
    gt = truth[MID] == 2
    rr, cc = np.nonzero(gt)
    box = (rr.min() - 3, cc.min() - 3, rr.max() + 3, cc.max() + 3)

    def clicks_and_box(bundle):
        click = api.segment(bundle, image, [_centre(gt), [5, 7]], labels=[1, 0], index=(MID,),
                            window=window)
        boxed = api.segment(bundle, image, box_rc=box, index=(MID,), window=window)
        return click.mask, boxed.mask

    (c1, b1), (c2, b2) = _on_both(toy_folder, recorder, clicks_and_box, tmp_path)
    assert c1.any() and b1.any()
    np.testing.assert_array_equal(c2, c1)
    np.testing.assert_array_equal(b2, b1)


def test_text_and_exemplars_match_onnxruntime(toy_folder, sample, recorder, tmp_path):
    image, truth, window = sample
    rr, cc = np.nonzero(truth[MID] == 3)
    exemplar = Exemplars(np.array([[rr.min(), cc.min(), rr.max(), cc.max()]], float),
                         np.array([False]))

    def text(bundle):
        found = api.search_text(bundle, image, "nucleus", window=window,
                                slices=slice(MID, MID + 1))
        from napari_sam3_onnx.api.search import iter_search
        from napari_sam3_onnx.api.workspace import Workspace
        from napari_sam3_onnx.engine.encoding import SliceRef

        ws = Workspace()
        ws.attach(bundle.adapter, bundle.folder)
        ref = SliceRef(image, (MID,), window=window)
        step, = iter_search(ws, [ref], ["nucleus"], exemplars={(MID,): exemplar})
        return np.asarray(found.labels), step.result.labels

    (t1, e1), (t2, e2) = _on_both(toy_folder, recorder, text, tmp_path)
    assert len(np.unique(t1)) > 2 and not e1[truth[MID] == 3].any()
    np.testing.assert_array_equal(t2, t1)
    np.testing.assert_array_equal(e2, e1)


def test_propagation_matches_onnxruntime(toy_folder, sample, recorder, tmp_path):
    image, truth, window = sample
    seeds = {n: api.Seed.clicks(MID - 2, [_centre(truth[MID - 2] == n)]) for n in (1, 4)}

    def track(bundle):
        labels, _ = api.propagate(bundle, image, seeds, window=window)
        return np.asarray(labels)

    first, second = _on_both(toy_folder, recorder, track, tmp_path)
    assert set(np.unique(first)) == {0, 1, 4}
    np.testing.assert_array_equal(second, first)


def test_automatic_matches_onnxruntime(recorder, tmp_path):
    folder = build_sloped_tracker(tmp_path / "steep", TestGeometry(grid=24))
    blobs = ((30, 40, 10), (100, 150, 9), (40, 190, 8))
    stack = np.stack([blob_image((150, 230), blobs, value=255),
                      blob_image((150, 230), blobs[:2], value=255)])

    def automatic(bundle):
        res = api.segment_all(bundle, stack, settings=AutoMaskSettings(points_per_side=12))
        return np.asarray(res.labels)

    first, second = _on_both(folder, recorder, automatic, tmp_path)
    assert len(np.unique(first)) > 2
    np.testing.assert_array_equal(second, first)


def test_a_graph_openvino_cannot_compile_falls_back_with_a_message(toy_folder, monkeypatch):
    from napari_sam3_onnx.models import runtime

    def refuse(*args, **kwargs):
        raise RuntimeError("OpConversionFailure: no converter for com.microsoft.Imaginary")

    monkeypatch.setattr(runtime, "OpenVinoSession", refuse)
    bundle = api.open_bundle(toy_folder, providers="OpenVINO CPU")
    image, _ = synthetic_nuclei(shape=(2, 150, 210))
    with pytest.warns(RuntimeWarning, match=r"image_encoder.onnx: OpenVINO CPU cannot run .*"
                                            r"Imaginary.*onnxruntime"):
        mask = api.segment(bundle, image, [[75, 100]], index=(1,)).mask
    assert mask.shape == (150, 210)
    encoder = bundle.adapter.encoder
    assert "Imaginary" in encoder.fallback and encoder.providers == ["CPUExecutionProvider"]


def test_the_compiled_graph_is_cached_in_the_data_folder(toy_folder, tmp_path):
    from napari_sam3_onnx.models.runtime import RuntimeConfig

    config = RuntimeConfig(providers="OpenVINO CPU", cache_dir=tmp_path / "cache")
    session = LazySession(toy_folder / "image_encoder.onnx", config)
    assert session.providers == ["OpenVINO CPU"]
    assert any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_the_gate_judges_openvino_per_workflow_on_the_same_graphs(toy_folder):
    from napari_sam3_onnx.export import gate

    reference = gate.decisions(toy_folder)
    result = gate.compare(reference, toy_folder, device="OpenVINO CPU")
    assert result["workflows"] == dict.fromkeys(gate.WORKFLOWS, True)
    assert result["summary"]["feature_max_rel_error"] < 1e-4


def test_a_graph_changed_in_place_is_never_served_from_a_stale_cache(hf_bundle, tmp_path):
    """The compiled-model cache notices new weights in the external data file beside an
    unchanged ``.onnx`` (a re-export in place): never the old compiled graph."""
    import shutil

    import onnx
    import onnxruntime as ort

    shutil.copytree(hf_bundle, tmp_path / "b")
    path = tmp_path / "b" / "vision_encoder.onnx"
    feed = {"pixel_values": np.random.default_rng(0).random((1, 3, 84, 84)).astype(np.float32)}
    out = ["image_embeddings.0"]
    before = OpenVinoSession(path, "f32", 1, tmp_path / "cache").run(out, feed)[0]
    graph_bytes = path.read_bytes()
    model = onnx.load(str(path), load_external_data=False)
    info = next({e.key: e.value for e in i.external_data} for i in model.graph.initializer
                if i.data_location == onnx.TensorProto.EXTERNAL
                and i.data_type == onnx.TensorProto.FLOAT)
    data = path.parent / info["location"]
    blob = bytearray(data.read_bytes())
    start, length = int(info.get("offset", 0)), int(info["length"])
    weights = np.frombuffer(bytes(blob[start:start + length]), np.float32) * 2 + 1
    blob[start:start + length] = weights.astype(np.float32).tobytes()
    data.write_bytes(bytes(blob))
    assert path.read_bytes() == graph_bytes  # the graph file itself did not change
    after = OpenVinoSession(path, "f32", 1, tmp_path / "cache").run(out, feed)[0]
    want = ort.InferenceSession(str(path)).run(out, feed)[0]
    assert not np.allclose(want, before)
    np.testing.assert_allclose(after, want, rtol=1e-4, atol=1e-5)
    graph_dir, = (tmp_path / "cache").iterdir()
    assert len(list(graph_dir.iterdir())) == 1  # the stale compiled graph was removed
