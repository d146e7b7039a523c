"""The Python API and the bundle tools against hostile inputs: refused before any encoding."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import blob_image
from napari_sam3_onnx import api
from napari_sam3_onnx.api.io import InputError, read_image
from napari_sam3_onnx.api.validate import SeedOverlapWarning
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.errors import ModelFileUnreadableError, PromptError
from napari_sam3_onnx.models.graph_info import check_external_data, read_signature
from napari_sam3_onnx.testing.pagarcia import build_pagarcia

#: (z, rows, cols), non-square; a blob drifting right.
STACK = np.stack([blob_image((60, 90), ((20, 20 + 5 * z, 7),)) for z in range(5)])


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, hf_bundle):
    """A memory bundle (pagarcia) and a carry-over one (the hf tracker pair)."""
    pag = build_pagarcia(tmp_path_factory.mktemp("pag") / "pag")
    return {"memory": api.open_bundle(pag), "carry-over": api.open_bundle(hf_bundle)}


@pytest.fixture
def no_encoding(monkeypatch, bundles):
    """Fail the test if any bundle encodes a slice: every refusal must come before work."""
    def refuse(self, rgb):
        raise AssertionError("encoded before the input was checked")

    for b in bundles.values():
        monkeypatch.setattr(type(b.adapter), "encode", refuse)


@pytest.mark.parametrize("kind", ["memory", "carry-over"])
@pytest.mark.parametrize(("seeds", "message"), [
    ({1: api.Seed.from_mask(2, np.zeros((60, 90), bool))}, "seed mask of object 1 on slice 2 is "
     "empty"),
    ({1: api.Seed.from_mask(2, np.ones((90, 60), bool))}, "is (90, 60), the slices (60, 90)"),
    ({1: api.Seed.clicks(2, [[np.nan, 4]])}, "must be finite"),
    ({1: api.Seed.clicks(2, [[20, 95]])}, "outside the 60 x 90 slice"),
    ({1: api.Seed.clicks(2, [[20, 30]], labels=[2])}, "must be 1 (positive) or 0"),
    ({1: api.Seed.clicks(2, [], box_rc=(5, 5, np.inf, 30))}, "finite"),
    ({1: api.Seed.clicks(2, [], box_rc=(5, 5, 5, 30))}, "has no area"),
    ({1: api.Seed.clicks(2, [], box_rc=(70, 0, 80, 30))}, "does not overlap"),
    ({1: api.Seed.clicks(7, [[20, 30]])}, "outside the stack (slices 0 to 4)"),
    ({3_000_000_000: api.Seed.clicks(2, [[20, 30]])}, "from 1 to 2147483647"),
    ({0: api.Seed.clicks(2, [[20, 30]])}, "from 1 to 2147483647"),
])
def test_bad_seeds_are_refused_alike_by_every_bundle_kind(bundles, no_encoding, kind, seeds,
                                                          message):
    with pytest.raises(PromptError) as info:
        api.propagate(bundles[kind], STACK, seeds)
    assert message in str(info.value)


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"window": (np.nan, 5)}, InputError, "finite"),
    ({"window": (9, 5)}, InputError, "upper limit must be above"),
    ({"stop_after_absent": 0}, PromptError, "1 or more"),
    ({"index_range": (3, 3)}, PromptError, "not a non-empty range"),
    ({"index_range": (0, 2)}, PromptError, "outside the range of slices to visit"),
])
def test_bad_propagation_options_are_refused_before_work(bundles, no_encoding, options, error,
                                                         message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        api.propagate(bundles["memory"], STACK, {1: api.Seed.clicks(3, [[20, 35]])}, **options)


def test_fixed_index_out_of_range_is_named(bundles, no_encoding):
    with pytest.raises(PromptError, match=r"Fixed index 4 is outside axis 1 of the data \(0"):
        api.propagate(bundles["memory"], np.stack([STACK, STACK], 1),
                      {1: api.Seed.clicks(3, [[20, 35]])}, fixed=(4,))


def test_two_objects_on_the_same_pixels_are_warned_about(bundles):
    mask = np.zeros((60, 90), bool)
    mask[15:25, 30:40] = True
    with pytest.warns(SeedOverlapWarning, match="Objects 1 and 2 .* slice 3 \\(100 px\\)"):
        api.propagate(bundles["memory"], STACK, {1: api.Seed.from_mask(3, mask),
                                                 2: api.Seed.from_mask(3, mask)},
                      stop_after_absent=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # apart: no warning
        other = np.roll(mask, 30, axis=1)
        api.propagate(bundles["memory"], STACK, {1: api.Seed.from_mask(3, mask),
                                                 2: api.Seed.from_mask(3, other)},
                      stop_after_absent=1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"points_rc": [[np.inf, 3]]}, "finite"),
    ({"points_rc": [[20, 30]], "labels": [-1]}, "1 (positive) or 0"),
    ({"points_rc": [[20, 30]], "window": (np.inf, 1)}, "finite"),
    ({"box_rc": (1, 1, 1, 9)}, "no area"),
    ({"points_rc": [[20, 30]], "index": (9,)}, "does not name a plane"),
])
def test_segment_refuses_bad_prompts_before_encoding(bundles, no_encoding, kwargs, message):
    with pytest.raises((PromptError, InputError)) as info:
        api.segment(bundles["carry-over"], STACK, **{"index": (2,), **kwargs})
    assert message in str(info.value)


@pytest.mark.parametrize(("array", "message"), [
    (np.zeros((0, 0), np.uint8), "holds no pixels"),
    (np.zeros((3, 0, 5), np.uint8), "holds no pixels"),
    (np.array([["a", "b"], ["c", "d"]]), "not numbers"),
    (np.zeros((4, 4), complex), "complex"),
])
def test_arrays_without_pixels_or_numbers_are_refused(bundles, no_encoding, array, message):
    with pytest.raises(InputError, match=message):
        api.precompute(bundles["carry-over"], array, Path(os.devnull).parent / "never.zarr")


def test_the_api_never_puts_a_store_over_an_input_image(bundles, no_encoding, tmp_path):
    np.save(tmp_path / "img.npy", STACK)
    before = (tmp_path / "img.npy").read_bytes()
    for store in (tmp_path / "img.npy", tmp_path):
        with pytest.raises(InputError, match="would be written over the image"):
            api.precompute(bundles["carry-over"], tmp_path / "img.npy", store)
    assert (tmp_path / "img.npy").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["img.npy"]


def test_threads_and_slice_steps_are_checked(hf_bundle):
    with pytest.raises(InputError, match="threads=-2"):
        api.open_bundle(hf_bundle, threads=-2)
    with pytest.raises(InputError, match="step must be a positive"):
        api.io.parse_slices("0:5:0")
    with pytest.raises(InputError, match="range 7:9 selects no plane"):
        api.jobs.StackJob(STACK, slices=slice(7, 9)).indices()


@pytest.mark.parametrize(("options", "message"), [
    ({"floor": np.nan}, "between 0 and 1"), ({"floor": 1.5}, "between 0 and 1"),
    ({"min_area": -3}, "min_area=-3"),
])
def test_text_options_are_checked_before_work(tmp_path, monkeypatch, options, message):
    from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
    from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

    folder = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(folder)
    bundle = api.open_bundle(folder)
    monkeypatch.setattr(type(bundle.adapter), "encode", None)  # encoding would be a TypeError
    with pytest.raises(InputError, match=message):
        api.search_text(bundle, STACK, "nucleus", **options)


def _deny(monkeypatch, denied: Path):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == denied
                        else real(p, mode))


def test_unreadable_graph_files_say_permission_denied_not_damaged(tmp_path, monkeypatch,
                                                                  hf_bundle):
    sig = read_signature(hf_bundle / "vision_encoder.onnx")
    data = hf_bundle / "vision_encoder.onnx_data"
    _deny(monkeypatch, data)
    with pytest.raises(ModelFileUnreadableError) as info:
        check_external_data(sig)
    msg = str(info.value)
    assert "permission denied" in msg and str(data) in msg and "Delete" not in msg
    _deny(monkeypatch, hf_bundle / "vision_encoder.onnx")
    with pytest.raises(ModelFileUnreadableError, match="permission denied"):
        read_signature(hf_bundle / "vision_encoder.onnx")


def test_an_unreadable_bundle_folder_is_not_called_empty(tmp_path, monkeypatch, hf_bundle):
    real = Path.iterdir

    def iterdir(self):
        if self == hf_bundle:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    with pytest.raises(ModelFileUnreadableError) as info:
        open_adapter(hf_bundle)
    assert "permission denied" in str(info.value) and "no .onnx files" not in str(info.value)


def test_list_and_doctor_report_an_unreadable_folder_and_go_on(tmp_path, monkeypatch, capsys,
                                                               hf_bundle):
    import shutil

    home = tmp_path / "home"
    for name in ("hf-tracker", "jax-video"):
        shutil.copytree(hf_bundle, home / "models" / name)
    locked = home / "models" / "hf-tracker"  # sorts first: the others must still be checked
    real = Path.iterdir

    def iterdir(self):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(home))
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "unreadable (permission denied)" in next(x for x in out.splitlines()
                                                    if x.startswith("hf-tracker "))
    assert next(x for x in out.splitlines() if x.startswith("jax-video ")).endswith("yes")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "hf-tracker: unreadable (permission denied); skipped" in out
    assert "  jax-video: " in out  # the folder after it was still checked
    assert main(["doctor", "--strict"]) == 1


def test_a_truncated_tiff_names_the_file_and_the_slice(tmp_path):
    import tifffile

    tifffile.imwrite(tmp_path / "s.tif", STACK * 3 + 1, photometric="minisblack")
    whole = (tmp_path / "s.tif").read_bytes()
    (tmp_path / "cut.tif").write_bytes(whole[: len(whole) // 2])
    image = read_image(tmp_path / "cut.tif")
    np.asarray(image[0])  # the first planes are intact
    with pytest.raises(InputError, match=r"cut.tif at slice [1-4] \(the file may be truncated"):
        for z in range(5):
            np.asarray(image[z])


def test_an_unreadable_input_says_permission_denied(tmp_path, monkeypatch):
    from napari_sam3_onnx.api.io import expand_inputs

    np.save(tmp_path / "img.npy", STACK)
    real_load, real_iterdir = np.load, Path.iterdir

    def load(path, *args, **kwargs):
        if Path(path) == tmp_path / "img.npy":
            raise PermissionError(13, "Permission denied", str(path))
        return real_load(path, *args, **kwargs)

    def iterdir(self):
        if self == tmp_path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(np, "load", load)
    with pytest.raises(InputError, match=r"Cannot read .*img.npy: permission denied"):
        read_image(tmp_path / "img.npy")
    monkeypatch.setattr(Path, "iterdir", iterdir)
    with pytest.raises(InputError, match=r"Cannot list folder .*: permission denied"):
        expand_inputs([tmp_path])
