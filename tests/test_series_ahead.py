"""The next image of a series read ahead: one read, handed over, dropped reads forgotten."""

from __future__ import annotations

import threading

import numpy as np
import tifffile

from napari_sam3_onnx.api.series import ImageSeries
from napari_sam3_onnx.api.series_ahead import ReadAhead, SeriesSource


def _series(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    for i, shape in enumerate([(30, 47), (41, 26), (26, 41)]):
        tifffile.imwrite(folder / f"im{i}.tif", np.full(shape, 10 * i + 3, np.uint16))
    return ImageSeries.open(folder, out=tmp_path / "out")


def _limits(data, rgb):
    return float(data.min()), float(data.max()) + 1


def test_one_read_is_held_and_handed_over(tmp_path):
    series = _series(tmp_path)
    forgot: list = []
    reads = ReadAhead(_limits, forgot.append)
    got = reads.read(series, 1)
    assert got.data.shape == (41, 26) and got.limits == (13.0, 14.0) and not got.rgb
    assert isinstance(got.source, SeriesSource) and got.source.name == "im1"
    assert reads.read(series, 1) is got and reads.peek() is got  # not read again
    assert reads.take(series, 1) is got and reads.peek() is None
    again = reads.read(series, 1)  # another read of the same file: another name
    assert again.source != got.source and again.source.item == got.source.item
    assert forgot == []


def test_reads_not_shown_are_forgotten(tmp_path):
    series = _series(tmp_path)
    forgot: list = []
    reads = ReadAhead(_limits, forgot.append)
    first = reads.read(series, 1)
    second = reads.read(series, 2)  # the user moved on meanwhile: the read of 1 goes
    assert forgot == [first.source]
    assert reads.take(series, 0) is None  # shown another image: the read of 2 goes too
    assert forgot == [first.source, second.source]
    reads.read(series, 1)
    reads.drop()
    assert len(forgot) == 3


def test_take_waits_for_the_read_under_way(tmp_path):
    series = _series(tmp_path)
    gate, entered = threading.Event(), threading.Event()
    real = series.items[1].read

    def slow_read(index):
        entered.set()
        gate.wait(10)
        return real()

    series.read = slow_read  # type: ignore[method-assign]
    reads = ReadAhead(_limits)
    box: list = []
    worker = threading.Thread(target=lambda: box.append(reads.read(series, 1)))
    worker.start()
    assert entered.wait(10)
    threading.Timer(0.2, gate.set).start()
    taken = reads.take(series, 1)  # the viewer's Next while the background reads it
    worker.join(10)
    assert taken is box[0]
