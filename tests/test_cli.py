"""The command line end to end on the test graphs: text, precompute, propagate, list, fetch."""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest
import tifffile

from fake_hub import FakeHub
from napari_sam3_onnx.api.text import table_columns
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.models.registry import get_bundle
from napari_sam3_onnx.testing.pagarcia import build_pagarcia
from napari_sam3_onnx.testing.scenes import BLOBS, SPECK, planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

TOP, RIGHT, MID = BLOBS[:3]
#: Which blobs each slice holds: the stack differs slice to slice, so a z mix-up shows.
PER_SLICE = ((TOP, RIGHT, MID, SPECK), (TOP, MID), (RIGHT,))
WINDOW = ("500", "26000")


def to_uint16(rgb8):
    return rgb8[..., 0].astype(np.uint16) * 100 + 500  # window 500..26000 maps it back


@pytest.fixture(scope="module")
def wk(tmp_path_factory):
    folder = build_wkentaro_v03(tmp_path_factory.mktemp("wk") / "wk-bundle")
    write_toy_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def stack_tif(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "cells.tif"
    tifffile.imwrite(path, np.stack([to_uint16(planted_image(blobs=b)) for b in PER_SLICE]),
                     photometric="minisblack")
    return path


def run(*argv, capsys=None):
    code = main([str(a) for a in argv])
    return code if capsys is None else (code, *capsys.readouterr())


def test_text_finds_the_planted_instances_into_labels_and_table(wk, stack_tif, tmp_path, capsys):
    code, out, err = run("text", wk, stack_tif, "--concepts", "nucleus", "--out",
                         tmp_path / "labels.tif", "--table", tmp_path / "t.csv", "--window",
                         *WINDOW, capsys=capsys)
    assert code == 0, err
    assert "6 instance(s)" in out
    labels = tifffile.imread(tmp_path / "labels.tif")
    assert labels.shape == (3, 60, 90) and labels.dtype == np.int32
    with open(tmp_path / "t.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        assert reader.fieldnames == table_columns(1)
    assert [r["label"] for r in rows] == [str(i) for i in range(1, 7)]  # unique over the stack
    for z, blobs in enumerate(PER_SLICE):
        found = [r for r in rows if r["index_0"] == str(z)]
        real = [b for b in blobs if b is not SPECK]
        assert len(found) == len(real)
        assert set(np.unique(labels[z])) - {0} == {int(r["label"]) for r in found}
        for blob in real:
            r, c = (blob.r0 + blob.r1) // 2, (blob.c0 + blob.c1) // 2
            row = next(x for x in found if int(x["label"]) == labels[z, r, c])
            box = [int(row[k]) for k in ("bbox_row0", "bbox_col0", "bbox_row1", "bbox_col1")]
            # masks are 24 x 24 upsampled to 60 x 90: edges within a mask pixel's half-width
            assert np.abs(np.subtract(box, (blob.r0, blob.c0, blob.r1 - 1, blob.c1 - 1))).max() \
                <= 2, (blob.name, box)
            assert int(row["area_px"]) == (labels[z] == labels[z, r, c]).sum()
            assert row["concept"] == "nucleus" and float(row["score"]) > 0.5
        assert labels[z, SPECK.r0 + 1, SPECK.c0 + 1] == 0


def test_text_on_a_slice_range_and_another_axis(wk, stack_tif, tmp_path, capsys):
    stack = tifffile.imread(stack_tif)
    np.save(tmp_path / "zlast.npy", np.moveaxis(stack, 0, 2))  # (rows, cols, z)
    assert run("text", wk, tmp_path / "zlast.npy", "--concepts", "nucleus", "--axis", "2",
               "--slices", "1:", "--out", tmp_path / "l.npy", "--window", *WINDOW) == 0
    ref = tmp_path / "ref.tif"
    assert run("text", wk, stack_tif, "--concepts", "nucleus", "--out", ref, "--window",
               *WINDOW) == 0
    got, full = np.load(tmp_path / "l.npy"), tifffile.imread(ref)
    assert got.shape == (3, 60, 90) and not got[0].any()
    np.testing.assert_array_equal(got[1:] > 0, full[1:] > 0)
    assert run("text", wk, stack_tif, "--concepts", "bright", "--out", tmp_path / "b.tif",
               "--window", *WINDOW) == 0
    assert len(np.unique(tifffile.imread(tmp_path / "b.tif")[1])) == 2  # the mid blob is dim


def test_precompute_then_text_reads_the_store_without_encoding(
        wk, stack_tif, tmp_path, capsys, monkeypatch):
    store = tmp_path / "emb.zarr"
    code, out, _ = run("precompute", wk, stack_tif, "--store", store, "--window", *WINDOW,
                       capsys=capsys)
    assert code == 0 and "encoded 3, skipped 0" in out
    code, out, _ = run("precompute", wk, stack_tif.parent, "--store", store, "--window",
                       *WINDOW, capsys=capsys)  # a folder: every image in it
    assert code == 0 and "encoded 0, skipped 3" in out

    def no_encoding(self, rgb):
        raise AssertionError("encoded although the store holds the slice")

    monkeypatch.setattr(type(open_adapter(wk)), "encode", no_encoding)
    code, out, err = run("text", wk, stack_tif, "--concepts", "nucleus", "--out",
                         tmp_path / "l.tif", "--store", store, "--window", *WINDOW,
                         capsys=capsys)
    assert code == 0 and "6 instance(s)" in out, err


def test_interrupted_precompute_exits_130_and_resumes(wk, stack_tif, tmp_path, capsys,
                                                      monkeypatch):
    cls = type(open_adapter(wk))
    real, calls = cls.encode, []

    def flaky(self, rgb):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(1)
        return real(self, rgb)

    monkeypatch.setattr(cls, "encode", flaky)
    code, _, err = run("precompute", wk, stack_tif, "--store", tmp_path / "e.zarr", "--fp16",
                       "--window", *WINDOW, capsys=capsys)
    assert code == 130 and "run the same command again" in err
    monkeypatch.undo()
    code, out, _ = run("precompute", wk, stack_tif, "--store", tmp_path / "e.zarr",
                       "--window", *WINDOW, capsys=capsys)  # the store remembers fp16
    assert code == 0 and "encoded 1, skipped 2" in out


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["text", "{wk}", "{tmp}/missing.tif", "--concepts", "a", "--out", "{tmp}/o.tif"], 2,
     "does not exist"),
    (["text", "{wk}", "{tmp}/line.npy", "--concepts", "a", "--out", "{tmp}/o.tif"], 2,
     "Expected a 2-D image"),
    (["text", "{wk}", "{tmp}/five.npy", "--concepts", "a", "--out", "{tmp}/o.tif"], 2,
     "got shape (2, 2, 2, 8, 8)"),
    (["text", "{wk}", "{tmp}/junk.tif", "--concepts", "a", "--out", "{tmp}/o.tif"], 2,
     "Cannot read"),
    (["text", "no-such-bundle", "{tif}", "--concepts", "a", "--out", "{tmp}/o.tif"], 2,
     "Unknown model bundle 'no-such-bundle'. Known bundles: toy, wkentaro-v0.3"),
    (["text", "{wk}", "{tif}", "--concepts", " , ", "--out", "{tmp}/o.tif"], 2,
     "Type at least one concept"),
    (["text", "{wk}", "{tif}", "--concepts", "a", "--out", "{tmp}/o.tif", "--slices", "7:9"],
     2, "selects no plane"),
    (["text", "{wk}", "{tif}", "--concepts", "a", "--out", "{tmp}/o.png"], 2, ".tif, .npy"),
    (["text", "{wk}", "{tif}", "--concepts", "a", "--out", "{tmp}/o.tif", "--window", "5",
      "1"], 2, "upper limit"),
    (["text", "{wk}", "{tif}", "--concepts", "a", "--out", "{tmp}/o.tif", "--axis", "3"], 2,
     "--axis 3"),
    (["precompute", "{wk}", "{tmp}/rgb.npy", "--store", "{tmp}/s.zarr"], 2, "pass --rgb"),
    (["precompute", "{wk}", "{tif}"], 2, "--store"),
    (["text", "{hf}", "{tif}", "--concepts", "a", "--out", "{tmp}/o.tif"], 1,
     "cannot do 'text'"),
    (["inspect", "{tmp}"], 1, "match no known"),
])
def test_bad_inputs_give_documented_codes(wk, hf_bundle, stack_tif, tmp_path, capsys, argv,
                                          code, message):
    np.save(tmp_path / "line.npy", np.arange(5))
    np.save(tmp_path / "five.npy", np.zeros((2, 2, 2, 8, 8)))
    np.save(tmp_path / "rgb.npy", planted_image())
    (tmp_path / "junk.tif").write_bytes(b"not a tiff at all")
    args = [a.format(wk=wk, tmp=tmp_path, tif=stack_tif, hf=hf_bundle) for a in argv]
    got, _, err = run(*args, capsys=capsys)
    assert got == code and message in err, err
    assert "Traceback" not in err
    assert not list(tmp_path.glob("o.*"))


def test_propagate_follows_a_blob_and_refuses_bad_seeds(tmp_path, capsys):
    folder = build_pagarcia(tmp_path / "pag")
    rr, cc = np.mgrid[:60, :90]
    stack = np.zeros((8, 60, 90), np.uint8)
    for z in range(8):
        stack[z][(rr - (10 + z)) ** 2 + (cc - (14 + 3.2 * z)) ** 2 <= 36] = 200
    tifffile.imwrite(tmp_path / "p.tif", stack, photometric="minisblack")
    code, out, _ = run("propagate", folder, tmp_path / "p.tif", "--click", 7, 3, 13, 24,
                       "--out", tmp_path / "t.tif", "--table", tmp_path / "t.csv",
                       capsys=capsys)
    assert code == 0 and "memory propagation" in out
    labels = tifffile.imread(tmp_path / "t.tif")
    for z in range(8):
        truth = stack[z] > 0
        assert ((labels[z] == 7) & truth).sum() / ((labels[z] == 7) | truth).sum() > 0.7
    assert len(open(tmp_path / "t.csv").read().splitlines()) == 9
    for bad, msg in ((["--click", 0, 3, 13, 24], "positive integer"),
                     (["--click", 1, 8, 13, 24], "outside the stack"), ([], "at least one")):
        got, _, err = run("propagate", folder, tmp_path / "p.tif", *bad, "--out",
                          tmp_path / "x.tif", capsys=capsys)
        assert got == 2 and msg in err


def test_list_and_fetch_from_a_local_server(hf_bundle, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    code, out, _ = run("list", capsys=capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("hf-tracker "))
    assert "boxes,clicks,encode" in line and line.rstrip().endswith("no")
    spec = get_bundle("hf-tracker")
    hub = FakeHub()
    try:
        for f in spec.files:
            local = hf_bundle / f.name
            data = local.read_bytes() if local.is_file() else bytes(range(256))  # binary
            hub.files[f.url.removeprefix("https://huggingface.co")] = data
        dest = tmp_path / "home" / "models" / "hf-tracker"
        code, out, err = run("fetch", "hf-tracker", "--endpoint", hub.url(""), capsys=capsys)
        assert code == 0 and "verified" in out, err
        assert "vision_encoder.onnx" not in err  # no progress bars when not on a terminal
        assert sorted(p.name for p in dest.iterdir() if not p.name.startswith(".")) == sorted(
            f.name for f in spec.files)
        code, out, _ = run("list", capsys=capsys)
        assert next(x for x in out.splitlines() if x.startswith("hf-tracker ")).endswith("yes")
        code, out, _ = run("doctor", capsys=capsys)
        assert "hf-tracker: ok, layout hf-tracker, 4 files" in out
    finally:
        hub.close()
    offline = ("fetch", "jax-video", "--endpoint", hub.url(""), "--retries", "0",
               "--dest", tmp_path / "jv")
    code, _, err = run(*offline, capsys=capsys)
    assert code == 2 and "Download the files by hand" in err and str(tmp_path / "jv") in err
    code, _, err = run("fetch", "nope", capsys=capsys)
    assert code == 2 and "Known bundles" in err


def test_doctor_reports_a_damaged_bundle(hf_bundle, tmp_path, capsys):
    import shutil

    shutil.copytree(hf_bundle, tmp_path / "bundles" / "hf-tracker")
    code, out, _ = run("doctor", "--root", tmp_path / "bundles", capsys=capsys)
    assert code == 0 and "prompt_encoder_mask_decoder.onnx_data: missing" in out
    assert run("doctor", "--root", tmp_path / "bundles", "--strict") == 1


def test_a_local_run_never_imports_dask_distributed(wk, stack_tif, tmp_path):
    script = (
        "import sys\nfrom napari_sam3_onnx.cli import main\n"
        f"assert main(['precompute', {str(wk)!r}, {str(stack_tif)!r}, '--store', "
        f"{str(tmp_path / 's.zarr')!r}]) == 0\n"
        "assert not [m for m in sys.modules if m.startswith('distributed')], 'imported'\n"
        "assert 'napari' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_help_explains_every_command(capsys):
    for command in ("list", "fetch", "inspect", "doctor", "precompute", "text", "propagate"):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert len(out) > 300 and "usage: napari-sam3-onnx " + command in out


def test_text_without_a_tokenizer_stops_before_encoding(stack_tif, tmp_path, capsys):
    folder = build_wkentaro_v03(tmp_path / "no-tokenizer")
    code, _, err = run("text", folder, stack_tif, "--concepts", "nucleus", "--out",
                       tmp_path / "o.tif", "--store", tmp_path / "s.zarr", capsys=capsys)
    assert code == 1 and "tokenizer.json" in err
    assert not (tmp_path / "s.zarr").exists() and not (tmp_path / "o.tif").exists()
