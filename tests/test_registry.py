from __future__ import annotations

import re

import pytest

from napari_sam3_onnx.models import registry
from napari_sam3_onnx.models.known_bundles import CLIP_BPE
from napari_sam3_onnx.models.registry import (
    KNOWN_BUNDLES,
    BundleSpec,
    UnknownBundleError,
    bundle_dir,
    get_bundle,
)

LAYOUT_IDS = {
    "wkentaro-v0.3",
    "wkentaro-v0.6",
    "samexporter-0.5",
    "hf-tracker",
    "pagarcia-tracker",
    "autognosi-int8",
    "jax-video",
    "comicapp-sam3.1",
    "hf-sam3",
    "pixl-sam3",
    "wkentaro-v0.2",
}
CAPS = {"encode", "clicks", "boxes", "text", "exemplars", "memory"}
HEX64 = re.compile(r"[0-9a-f]{64}")
#: Entries fetched from a hub (the toy is built on this machine instead).
DOWNLOADED = tuple(b for b in KNOWN_BUNDLES if not b.builder)


def test_layout_and_capability_constants_match_the_agreed_ids():
    assert registry.LAYOUTS == LAYOUT_IDS
    assert registry.CAPABILITIES == CAPS


def test_every_layout_has_a_bundle_and_ids_are_unique():
    ids = [b.id for b in KNOWN_BUNDLES]
    assert len(ids) == len(set(ids))
    assert {b.layout for b in DOWNLOADED} == LAYOUT_IDS


def test_the_toy_is_a_registry_entry_built_here_with_every_capability():
    toy = get_bundle("toy")
    assert toy.builder and toy.files == () and toy.downloadable
    assert toy.capabilities == CAPS
    assert "not sam 3" in toy.title.lower()
    assert [b.id for b in KNOWN_BUNDLES if b.builder] == ["toy"]


@pytest.mark.parametrize("spec", DOWNLOADED, ids=lambda b: b.id)
def test_bundle_is_well_formed(spec: BundleSpec):
    assert spec.layout in LAYOUT_IDS
    assert spec.capabilities <= CAPS
    assert "encode" in spec.capabilities
    assert spec.licence_name == "SAM License"
    assert spec.licence_url.startswith("https://")
    assert spec.title and spec.notes
    assert spec.precision in {"fp32", "fp16", "int8", "mixed"}
    assert isinstance(spec.gated, bool)
    names = [f.name for f in spec.files]
    assert len(names) == len(set(names))
    for f in spec.files:
        assert f.name and "/" not in f.name and "\\" not in f.name
        assert f.sha256 is None or HEX64.fullmatch(f.sha256)
        assert f.size is None or f.size > 0
        if f == CLIP_BPE:  # shared file from another source: pinned by hash and size
            assert f.sha256 and f.size
        elif f.url:
            prefixes = tuple(f"https://huggingface.co/{repo}/resolve/"
                             for repo in (spec.source_repo, *spec.other_sources))
            assert f.url.startswith(prefixes), f.url
            if f.url.startswith(prefixes[0]):
                assert f.url.startswith(f"{prefixes[0]}{spec.revision}/"), f.url
            assert f.url.endswith(f.name)
    if any(f.url and f.sha256 is None for f in spec.files):
        assert "hash" in spec.notes.lower()
    if spec.revision == "main":
        assert "no revision is pinned" in spec.notes.lower()


def test_pinned_revisions_are_full_commits():
    for bundle_id in ("wkentaro-v0.3", "hf-tracker", "pagarcia-tracker"):
        assert re.fullmatch(r"[0-9a-f]{40}", get_bundle(bundle_id).revision)


def test_wkentaro_v03_matches_the_hashes_osam_pins():
    spec = get_bundle("wkentaro-v0.3")
    by_name = {f.name: f for f in spec.files}
    assert spec.source_repo == "wkentaro/sam3-onnx-models-v0.3.0"
    assert spec.revision == "895f3980b24a88249898cbe5a44571b15dec2a7f"
    assert by_name["sam3_decoder.onnx"].sha256 == (
        "bbc216dbf3de4742f692c2a0a0fd215ea8957956002a05f28150040a88b5dc1a"
    )
    assert by_name["sam3_image_encoder.onnx.data"].sha256 == (
        "03bd50b0703e2b04e2193ca831b7f9d5ecf40bc5287cc59b1970f56ab800c995"
    )
    # osam pins no external-data file for the decoder; the graph carries its weights.
    assert "sam3_decoder.onnx.data" not in by_name
    assert sum(f.sha256 is not None for f in spec.files if f != CLIP_BPE) == 5
    assert spec.downloadable


def test_downloadable_text_bundles_bring_the_clip_vocabulary():
    for spec in DOWNLOADED:
        if "text" in spec.capabilities and spec.downloadable:
            assert CLIP_BPE in spec.files, spec.id


def test_hf_tracker_files_come_from_the_onnx_subfolder_and_are_stored_flat():
    spec = get_bundle("hf-tracker")
    assert [f.name for f in spec.files] == [
        "vision_encoder.onnx",
        "vision_encoder.onnx_data",
        "prompt_encoder_mask_decoder.onnx",
        "prompt_encoder_mask_decoder.onnx_data",
    ]
    assert all(f"/resolve/{spec.revision}/onnx/{f.name}" in f.url for f in spec.files)


def test_unpublished_files_and_bundles_are_marked_not_downloadable():
    pag = get_bundle("pagarcia-tracker")
    assert not pag.downloadable
    unpublished = {f.name for f in pag.files if not f.url}
    assert "memory_attention_single.onnx" in unpublished
    assert "video_constants_multi.npz" in unpublished
    assert get_bundle("autognosi-int8").files == ()
    assert not get_bundle("autognosi-int8").downloadable
    assert get_bundle("wkentaro-v0.6").page_url == ""


def test_get_bundle_unknown_id_lists_known_ids():
    with pytest.raises(KeyError) as info:
        get_bundle("sam3-nonexistent")
    err = info.value
    assert isinstance(err, UnknownBundleError)
    message = str(err)
    assert "sam3-nonexistent" in message
    for spec in KNOWN_BUNDLES:
        assert spec.id in message


def test_bundle_dir_uses_root_then_env_then_user_cache(tmp_path, monkeypatch):
    assert bundle_dir("hf-tracker", root=tmp_path) == tmp_path / "models" / "hf-tracker"
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    assert bundle_dir("jax-video") == tmp_path / "home" / "models" / "jax-video"
    monkeypatch.delenv("NAPARI_SAM3_ONNX_HOME")
    monkeypatch.setattr(registry, "user_cache_dir", lambda app: str(tmp_path / "cache" / app))
    expected = tmp_path / "cache" / "napari-sam3-onnx" / "models" / "jax-video"
    assert bundle_dir("jax-video") == expected


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".hidden", "a..b"])
def test_bundle_dir_rejects_non_folder_names(bad, tmp_path):
    with pytest.raises(ValueError):
        bundle_dir(bad, root=tmp_path)
