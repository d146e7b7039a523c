"""CLI progress through tqdm: bars on a terminal, per slice and per file; silent otherwise."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
import tifffile

from fake_hub import FakeHub
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.cli.progress import Bar, FileBars
from napari_sam3_onnx.models.registry import get_bundle
from napari_sam3_onnx.testing.scenes import planted_image
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_shows_the_label_and_reaches_the_total():
    term = Terminal()
    bar = Bar("encode", stream=term)
    for done in range(1, 8):
        bar.update(done, 7)
    bar.close()
    text = term.getvalue()
    assert "encode" in text and "7/7" in text and "100%" in text


@pytest.mark.parametrize("stream, quiet", [(io.StringIO(), False), (Terminal(), True)],
                         ids=["not-a-terminal", "quiet"])
def test_a_bar_draws_nothing_off_a_terminal_or_when_quiet(stream, quiet):
    bar = Bar("encode", quiet=quiet, stream=stream)
    bar.update(3, 7)
    bar.close()
    assert stream.getvalue() == "" and bar.done == 3


def test_file_bars_draw_one_byte_bar_per_file():
    term = Terminal()
    bars = FileBars(stream=term)
    for name, size in (("vision_encoder.onnx", 3 << 20), ("prompt_decoder.onnx", 5000)):
        for done in (0, size // 2, size):
            bars(name, done, size)
    bars.close()
    text = term.getvalue()
    assert "vision_encoder.onnx" in text and "prompt_decoder.onnx" in text
    assert "3.00M" in text  # bytes, scaled by 1024


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    folder = build_wkentaro_v03(root / "wk")
    write_toy_tokenizer(folder)
    gray = planted_image()[..., 0].astype(np.uint16) * 16
    stack = root / "cells.tif"
    tifffile.imwrite(stack, np.stack([gray, gray[:, ::-1], gray[::-1], gray]),
                     photometric="minisblack")
    return folder, stack


@pytest.mark.parametrize("quiet", [False, True])
def test_text_draws_a_per_slice_bar_on_a_terminal_unless_quiet(toy, tmp_path, monkeypatch,
                                                              quiet):
    folder, stack = toy
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    argv = ["text", str(folder), str(stack), "--concepts", "bright", "--out",
            str(tmp_path / "l.tif"), *(["--quiet"] if quiet else [])]
    assert main(argv) == 0, term.getvalue()
    if quiet:
        assert term.getvalue() == ""
    else:
        assert "search" in term.getvalue() and "4/4" in term.getvalue()


@pytest.mark.parametrize("quiet", [False, True])
def test_fetch_draws_a_bar_per_file_on_a_terminal_unless_quiet(hf_bundle, tmp_path, monkeypatch,
                                                              quiet):
    monkeypatch.setenv("NAPARI_SAM3_ONNX_HOME", str(tmp_path / "home"))
    spec = get_bundle("hf-tracker")
    hub = FakeHub()
    try:
        for f in spec.files:
            local = hf_bundle / f.name
            data = local.read_bytes() if local.is_file() else bytes(range(256)) * 5  # binary
            hub.files[f.url.removeprefix("https://huggingface.co")] = data
        term = Terminal()
        monkeypatch.setattr(sys, "stderr", term)
        argv = ["fetch", "hf-tracker", "--endpoint", hub.endpoint, *(["-q"] if quiet else [])]
        assert main(argv) == 0, term.getvalue()
    finally:
        hub.close()
    text = term.getvalue()
    for f in spec.files:
        assert (f.name in text) != quiet
