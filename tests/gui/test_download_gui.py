"""The widget's Download menu through huggingface_hub, against a fake Hub on 127.0.0.1."""

from __future__ import annotations

import pytest

from fake_hub import FakeHub

from .conftest import open_plugin_widget

pytestmark = pytest.mark.gui


def test_download_reports_progress_per_file_and_loads_the_bundle(make_napari_viewer, qtbot,
                                                                 hf_bundle, tmp_path,
                                                                 monkeypatch):
    from huggingface_hub import constants

    from napari_sam3_onnx.models.registry import bundle_dir, get_bundle

    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    spec = get_bundle("hf-tracker")
    hub = FakeHub()
    # what $HF_ENDPOINT sets when huggingface_hub is imported
    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    try:
        for f in spec.files:
            local = hf_bundle / f.name
            # binary stand-in weights: text served as weights is refused as an error page
            data = local.read_bytes() if local.is_file() else bytes(range(256)) * 8
            hub.files[f.url.removeprefix("https://huggingface.co")] = data
        viewer = make_napari_viewer()
        _dock, w = open_plugin_widget(viewer)  # as napari opens it
        seen: list[tuple[str, int, object]] = []
        w.model._relay.progress.connect(lambda *a: seen.append(a))
        w.model.start_download(spec)
        assert not w.model.progress.isHidden() and not w.model.download.isEnabled()
        qtbot.waitUntil(lambda: w.session.encoder is not None and w.model.download.isEnabled(),
                        timeout=30000)
    finally:
        hub.close()
    assert w.model.download.isEnabled() and w.model.progress.isHidden()
    assert w.model.bundle_folder == bundle_dir("hf-tracker")
    assert w.model.folder.toolTip() == str(bundle_dir("hf-tracker").resolve())
    finished = {name for name, done, total in seen if done == total}
    assert finished == {f.name for f in spec.files}
