"""Text search over tiles: duplicates in overlaps merged, cut objects joined, ids and scores.

The toy detector answers one query per cell of a 4 x 4 grid over what it encodes (21-px cells
on an 84-px tile at 1:1), and a cell needs about a third of its pixels bright to pass the 0.5
score cut. The default grid for its 84-px input (84-px tiles, 21 px overlap, stride 63) puts
every tile's cells on one 21-px lattice, so a 14-px square inside a lattice cell is whole in one
query of every tile that sees it -- up to four tiles in the overlaps.
"""

import numpy as np
import pytest

from napari_sam3_onnx import api
from napari_sam3_onnx.cli import main
from napari_sam3_onnx.engine.cache import EmbeddingCache
from napari_sam3_onnx.engine.concepts.search import TextCache, search_slice
from napari_sam3_onnx.engine.concepts.tokenizer import ClipTokenizer
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.tiling.tiled import tile_refs
from napari_sam3_onnx.engine.tiling.tiled_search import (
    Part,
    merge_parts,
    search_tiled,
    tile_parts,
)
from napari_sam3_onnx.engine.tiling.tiles import TileSettings
from napari_sam3_onnx.models.bundle import open_adapter
from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

SHAPE = (336, 525)  # 84 + 4 * 63 rows, 84 + 7 * 63 columns: no tile is shifted to the end
#: (row cell, col cell) of the 21-px lattice; cells 3, 6, 9, ... lie in tile overlaps
CELLS = ((1, 3), (3, 3), (3, 7), (6, 12), (8, 1), (14, 22), (10, 18))


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    folder = build_wkentaro_v03(tmp_path_factory.mktemp("wk_tiles"))
    write_toy_tokenizer(folder)
    adapter = open_adapter(folder)
    return folder, adapter, TextCache(adapter, ClipTokenizer.from_folder(folder, 32))


def _lattice_image():
    img = np.full(SHAPE, 12, np.uint8)
    img[:, 300:] = 30  # a brighter right half (still far below the 0.25 text level)
    for r, c in CELLS:
        img[21 * r + 3:21 * r + 17, 21 * c + 4:21 * c + 18] = 220
    return img


def test_each_planted_instance_is_found_exactly_once(toy):
    _, adapter, texts = toy
    ref = SliceRef(_lattice_image(), (), source="lattice")
    enc = SliceEncoder(adapter, EmbeddingCache(budget_bytes=0))
    whole = search_tiled(adapter, enc.embed, ref, ["nucleus"], texts,
                         TileSettings(threshold=10_000))
    assert whole.instances == [] and enc.encoder_calls == 1  # squeezed 4-6x: nothing passes
    done = []
    res = search_tiled(adapter, enc.embed, ref, ["nucleus"], texts, TileSettings(), first_id=5,
                       index=(2,), progress=lambda n, t: done.append((n, t)))
    assert enc.encoder_calls == 1 + 5 * 8 and done[-1] == (40, 40)
    assert whole.min_score == res.min_score == 0.5  # the graph's own cut, whole or tiled
    assert [i.id for i in res.instances] == list(range(5, 5 + len(CELLS)))
    seen = set()
    for r, c in CELLS:
        square = res.labels[21 * r + 3:21 * r + 17, 21 * c + 4:21 * c + 18]
        ids = set(np.unique(square)) - {0}
        assert len(ids) == 1 and square.mean() > 0  # one object, not split, not missed
        oid = ids.pop()
        assert (res.labels == oid).sum() < 1.6 * 14 * 14 and oid not in seen
        seen.add(oid)
        inst = next(i for i in res.instances if i.id == oid)
        assert inst.index == (2,) and inst.score > 0.5
        assert abs(inst.box_rc[0] - (21 * r + 3)) < 5 and abs(inst.box_rc[1] - (21 * c + 4)) < 5
    # before merging, squares in overlaps come once per tile that sees them (up to four)
    parts = [p for t in tile_refs(ref, TileSettings(), 84)
             for p in tile_parts(search_slice(adapter, enc.embed(t), ["nucleus"], texts),
                                 t.region)]
    assert len(parts) == 2 + 4 + 2 + 4 + 1 + 1 + 2  # per square in CELLS order


def test_objects_cut_by_tile_edges_are_joined_with_one_id(toy):
    _, adapter, texts = toy
    shape = (168, 252)  # tiles of 84 without overlap: edges at row 84 and columns 84, 168
    img = np.full(shape, 12, np.uint8)
    img[22:42, 74:94] = 220  # across the column-84 edge
    img[74:94, 128:146] = 220  # across the row-84 edge
    img[106:124, 1:20] = 220  # inside one tile (and one of its query cells)
    enc = SliceEncoder(adapter, EmbeddingCache(budget_bytes=0))
    res = search_tiled(adapter, enc.embed, SliceRef(img, (), source="cut"), ["nucleus"], texts,
                       TileSettings(overlap=0))
    assert len(res.instances) == 3
    for sl in ((slice(22, 42), slice(74, 94)), (slice(74, 94), slice(128, 146)),
               (slice(106, 124), slice(1, 20))):
        ids = set(np.unique(res.labels[sl])) - {0}
        assert len(ids) == 1 and (res.labels[sl] > 0).mean() > 0.6
    spans = sorted((i.box_rc[1], i.box_rc[3]) for i in res.instances)
    assert spans[1][0] < 80 and spans[1][1] > 88  # the first square spans both tiles


def _part(tile, window, concept="a", score=0.9, fill=True):
    mask = np.zeros((window[2] - window[0], window[3] - window[1]), bool)
    mask[:] = fill
    return Part(tile, window, mask, concept, score)


def test_merge_rules_iou_in_overlap_edges_and_concepts():
    shape = (200, 300)
    a, b = (0, 0, 100, 120), (0, 80, 100, 200)  # 40 columns of overlap
    parts = [
        _part(a, (10, 85, 30, 105)),  # 0: whole, inside the overlap
        _part(b, (10, 86, 30, 105)),  # 1: the same object seen by tile b
        _part(a, (50, 100, 60, 120)),  # 2: cut by a's right edge (column 119)
        _part(b, (50, 100, 60, 140)),  # 3: its whole self in b
        _part(b, (10, 86, 30, 105), concept="b"),  # 4: another concept: never merged
        _part(a, (70, 60, 80, 70)),  # 5: a neighbour in a's own tile
        _part(b, (70, 81, 80, 90)),  # 6: a different object next to it in b
    ]
    groups = sorted(sorted(g) for g in merge_parts(parts, shape))
    assert groups == [[0, 1], [2, 3], [4], [5], [6]]
    # no overlap: a part touching the shared edge continues into the next tile
    left, right = (0, 0, 100, 100), (0, 100, 100, 200)
    edge = [_part(left, (40, 90, 50, 100)), _part(right, (41, 100, 50, 112)),
            _part(right, (70, 100, 80, 110))]  # touches the edge but not the first part
    assert sorted(sorted(g) for g in merge_parts(edge, shape)) == [[0, 1], [2]]


def test_tiles_go_to_the_store_and_text_reads_them_back(toy, tmp_path):
    folder, _, _ = toy
    img = _lattice_image()
    stack = np.stack([img, img[::-1]])  # the second plane upside down
    with api.open_bundle(folder) as bundle:
        report = api.precompute(bundle, stack, tmp_path / "emb.zarr", tile=84)
        assert report.encoded == 2 * 40
        again = api.precompute(bundle, stack, tmp_path / "emb.zarr", tile=84)
        assert (again.encoded, again.skipped) == (0, 80)
        res = api.search_text(bundle, stack, "nucleus", store=tmp_path / "emb.zarr", tile=84)
    assert len(res.rows) == 2 * len(CELLS) and {r["label"] for r in res.rows} == set(
        range(1, 2 * len(CELLS) + 1))
    r, c = CELLS[0]
    assert res.labels[0, 21 * r + 10, 21 * c + 10] > 0
    assert res.labels[1, SHAPE[0] - 1 - (21 * r + 10), 21 * c + 10] > 0
    np.save(tmp_path / "img.npy", img)
    out = tmp_path / "labels.npy"
    assert main(["text", str(folder), str(tmp_path / "img.npy"), "--concepts", "nucleus",
                 "--out", str(out), "--tile", "84"]) == 0
    assert len(np.unique(np.load(out))) == len(CELLS) + 1
    assert main(["text", str(folder), str(tmp_path / "img.npy"), "--concepts", "nucleus",
                 "--out", str(out), "--tile", "1"]) == 2
