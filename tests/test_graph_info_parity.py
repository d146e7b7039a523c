"""The chunked header walk gives onnx's own answer, on every test layout and on a large graph.

``read_signature`` walks the protobuf over big reads (``protobuf_wire.CHUNK``) and keeps its
answers by file identity; these tests hold it to ``onnx.load(..., load_external_data=False)``
on the graphs of every layout the suite builds, on a graph with thousands of nodes and large
inline and external initializers, with the window shrunk to a few bytes (every field then
crosses a read boundary), and on hostile files (every truncation point, garbage, endless
varints), which must raise :class:`CorruptModelError` and never hang or answer wrongly.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from napari_sam3_onnx.models import graph_info, protobuf_wire  # noqa: E402
from napari_sam3_onnx.models.errors import CorruptModelError  # noqa: E402
from napari_sam3_onnx.models.graph_info import read_signature  # noqa: E402
from napari_sam3_onnx.models.graph_nodes import read_nodes  # noqa: E402


def _onnx_answer(path: Path):
    """Inputs (initializers left out), outputs and external refs as onnx reads them."""
    m = onnx.load(str(path), load_external_data=False)
    g = m.graph
    init = {t.name for t in g.initializer}

    def info(v):
        t = v.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in t.shape.dim)
        dtype = (helper.tensor_dtype_to_np_dtype(t.elem_type).name
                 if t.elem_type not in (0, 16) else {0: "onnx-type-0", 16: "bfloat16"}[t.elem_type])
        return v.name, dtype if v.type.HasField("tensor_type") else "unknown", dims

    refs = []
    for t in g.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            entries = {e.key: e.value for e in t.external_data}
            if "location" in entries:
                length = entries.get("length")
                refs.append((t.name, entries["location"], int(entries.get("offset", 0)),
                             int(length) if length else None))
    return ([info(v) for v in g.input if v.name not in init], [info(v) for v in g.output], refs)


def _ours(path: Path):
    sig = read_signature(path)
    return ([(t.name, t.dtype, t.shape) for t in sig.inputs],
            [(t.name, t.dtype, t.shape) for t in sig.outputs],
            [(r.tensor, r.location, r.offset, r.length) for r in sig.external])


def _layouts(root: Path) -> list[Path]:
    from napari_sam3_onnx.testing import (
        autognosi,
        comicapp,
        hf_sam3,
        hf_tracker,
        jax_video,
        pagarcia,
        pixl,
        samexporter,
        wkentaro,
    )
    from napari_sam3_onnx.testing.geometry import SMALL
    from napari_sam3_onnx.testing.memory import MEMORY_SMALL
    from napari_sam3_onnx.toy.bundle import build as build_toy

    builders = {
        "hf-tracker": lambda d: hf_tracker.build_hf_tracker(d, SMALL),
        "wkentaro-v0.3": lambda d: wkentaro.build_wkentaro_v03(d, SMALL),
        "wkentaro-v0.6": lambda d: wkentaro.build_wkentaro_v06(d, SMALL),
        "samexporter": lambda d: samexporter.build_samexporter(d, SMALL),
        "autognosi": lambda d: autognosi.build_autognosi(d, SMALL),
        "comicapp": lambda d: comicapp.build_comicapp(d, SMALL),
        "pagarcia": lambda d: pagarcia.build_pagarcia(d, MEMORY_SMALL),
        "jax-video": lambda d: jax_video.build_jax_video(d, MEMORY_SMALL),
        "pixl": lambda d: pixl.build_pixl(d, SMALL),
        "hf-sam3": lambda d: hf_sam3.build_dual(d, MEMORY_SMALL, memory=True),
        "toy": build_toy,
    }
    for name, build in builders.items():
        build(root / name)
    return sorted(root.rglob("*.onnx"))


@pytest.fixture(scope="module")
def suite_graphs(tmp_path_factory) -> list[Path]:
    return _layouts(tmp_path_factory.mktemp("layouts"))


def _large_graph(path: Path, nodes: int = 6000, external: bool = False) -> Path:
    """A chain of ``nodes`` nodes with long names, ~24 MB of weights inline (or external),
    dynamic and fixed dims, an initializer also listed as an input (old IR style)."""
    rng = np.random.default_rng(3)
    weights = [numpy_helper.from_array(rng.standard_normal((512, 1024 + k), np.float32),
                                       f"trunk.blocks.{k}.mlp.fc1.weight") for k in range(12)]
    small = [numpy_helper.from_array(np.arange(k + 1, dtype=np.int64), f"shape_const_{k}")
             for k in range(300)]
    chain = []
    prev = "pixel_values"
    for k in range(nodes):
        out = f"/trunk/blocks.{k % 32}/attn/Identity_output_{k}"
        chain.append(helper.make_node("Identity", [prev], [out],
                                      name=f"/trunk/blocks.{k % 32}/attn/Identity_{k}"))
        prev = out
    chain.append(helper.make_node("Identity", [prev], ["feat_s0"], name="last"))
    chain.append(helper.make_node("Shape", ["feat_s0"], ["feat_shape"], name="shape"))
    g = helper.make_graph(
        chain, "big",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, "h", 1008]),
         helper.make_tensor_value_info("shape_const_0", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("num_points", TensorProto.INT32, [None, 2])],
        [helper.make_tensor_value_info("feat_s0", TensorProto.FLOAT, [1, 3, "h", 1008]),
         helper.make_tensor_value_info("feat_shape", TensorProto.INT64, [4]),
         helper.make_tensor_value_info("half", TensorProto.FLOAT16, [2, 3]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        initializer=[*weights, *small])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=path.name + ".data", size_threshold=1024)
    else:
        onnx.save(model, str(path))
    return path


def test_every_layout_matches_onnx(suite_graphs):
    assert len(suite_graphs) > 25
    for path in suite_graphs:
        assert _ours(path) == _onnx_answer(path), path


def test_a_large_graph_inline_and_external_matches_onnx(tmp_path):
    inline = _large_graph(tmp_path / "inline.onnx")
    (tmp_path / "ext").mkdir()
    external = _large_graph(tmp_path / "ext" / "external.onnx", external=True)
    assert inline.stat().st_size > 20 << 20  # weights inline: fields far beyond one read
    ours = _ours(inline)
    assert ours == _onnx_answer(inline)
    assert [n for n, *_ in ours[0]] == ["pixel_values", "num_points"]  # initializer left out
    assert _ours(external) == _onnx_answer(external)
    assert len(read_signature(external).external) > 100  # weights and the larger constants


def test_read_boundaries_anywhere_give_the_same_answer(suite_graphs, tmp_path, monkeypatch):
    large = _large_graph(tmp_path / "large.onnx", nodes=800)
    expected = {p: _onnx_answer(p) for p in [*suite_graphs[:12], large]}
    nodes = {p: read_nodes(p) for p in expected}
    for chunk, first in ((7, 3), (64, 5), (4096, 21)):
        monkeypatch.setattr(protobuf_wire, "CHUNK", chunk)
        monkeypatch.setattr(protobuf_wire, "FIRST_READ", first)
        graph_info.SIGNATURES.clear()
        from napari_sam3_onnx.models import graph_nodes

        graph_nodes.NODES.clear()
        for path, answer in expected.items():
            assert _ours(path) == answer, (path, chunk)
            again = read_nodes(path)
            assert [(n.op_type, n.inputs, n.outputs) for n in again.nodes] == \
                [(n.op_type, n.inputs, n.outputs) for n in nodes[path].nodes]


def test_nodes_of_a_large_graph_match_onnx(tmp_path):
    path = _large_graph(tmp_path / "large.onnx", nodes=3000)
    ours = read_nodes(path)
    theirs = onnx.load(str(path), load_external_data=False).graph
    assert [(n.op_type, n.inputs, n.outputs) for n in ours.nodes] == \
        [(n.op_type, tuple(n.input), tuple(n.output)) for n in theirs.node]
    assert set(ours.initializers) == {t.name for t in theirs.initializer}
    assert ours.initializers["trunk.blocks.0.mlp.fc1.weight"] is None  # large: not read
    np.testing.assert_array_equal(ours.initializers["shape_const_4"], np.arange(5))


def _graph_end(path: Path) -> int:
    """Where the graph field (ModelProto field 7) ends in the file."""
    end = -1
    with path.open("rb") as f:
        window = protobuf_wire.Window(f)
        for num, _wire, ln, st in protobuf_wire.walk(window, 0, path.stat().st_size):
            if num == 7:
                end = st + ln
    return end


def test_every_truncation_is_an_error_or_the_whole_answer(suite_graphs, tmp_path):
    src = min(suite_graphs, key=lambda p: p.stat().st_size)  # small: every byte a cut point
    data, whole, end = src.read_bytes(), _ours(src), _graph_end(src)
    cuts = range(1, len(data)) if len(data) < 20000 else sorted(
        set(np.random.default_rng(0).integers(1, len(data), 3000)) | {end - 1, end})
    for cut in cuts:
        bad = tmp_path / "cut.onnx"
        bad.write_bytes(data[:cut])
        if cut < end:  # the graph is cut: never an answer
            with pytest.raises(CorruptModelError):
                read_signature(bad)
        else:  # cut in the trailing fields (opset imports): an error, or, cut between
            try:  # two fields, the graph's own answer
                assert _ours(bad) == whole
            except CorruptModelError as exc:
                assert "ends early" in str(exc)


def test_a_large_graph_cut_in_its_weights_or_nodes_is_an_error(tmp_path):
    src = _large_graph(tmp_path / "large.onnx", nodes=2000)
    data = src.read_bytes()
    for cut in (100, 50_000, 150_000, len(data) // 2, len(data) - 40):
        bad = tmp_path / "cut.onnx"
        bad.write_bytes(data[:cut])
        with pytest.raises(CorruptModelError, match=r"ends early|no graph"):
            read_signature(bad)
        with pytest.raises(CorruptModelError):
            read_nodes(bad)


@pytest.mark.parametrize("content", [
    b"\x80" * 5000,  # a varint that never ends
    b"\x3a\xff\xff\xff\xff\xff\xff\xff\xff\x7f",  # graph field longer than any file
    b"\x0b" * 64,  # wire type 3 (groups): not ONNX
    b"\x39" + b"\x00" * 3,  # fixed64 cut short
    bytes(range(256)) * 40,
    os.urandom(1 << 16),
    b"<html><body>404 Not Found</body></html>\n",
])
def test_garbage_is_a_clear_error(tmp_path, content):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(content)
    with pytest.raises(CorruptModelError) as info:
        read_signature(bad)
    assert "garbage.onnx" in str(info.value)


def test_a_signature_names_the_path_it_was_asked_for(tmp_path):
    real = _large_graph(tmp_path / "a.onnx", nodes=10)
    old = 1_000_000_000
    os.utime(real, ns=(old * 10**9, old * 10**9))
    link = tmp_path / "b.onnx"
    link.symlink_to(real)
    assert read_signature(real).path == real
    assert read_signature(link).path == link  # the same inode, kept or not: its own name
