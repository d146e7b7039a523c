"""Every image command streams: no whole stack (input or labels) is held in memory.

The check is a ``tracemalloc`` peak bound. numpy reports its array buffers to ``tracemalloc``
while pages of a memory-mapped file are not allocations, so a command that reads its ``.npy``
input plane by plane and writes its labels through memory-mapped files peaks at a few planes,
whereas one that builds its ``(z, rows, cols)`` int32 labels in memory peaks above the size of
that array. The stacks here are several times larger than the budget each command may use.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from napari_sam3_onnx.cli import main
from napari_sam3_onnx.testing.pagarcia import build_pagarcia

Z, ROWS, COLS = 40, 240, 360
#: Bytes a command may allocate at its peak: a quarter of the int32 labels stack (13.8 MB).
BUDGET = Z * ROWS * COLS * 4 // 4


@pytest.fixture(scope="module")
def pag(tmp_path_factory):
    return build_pagarcia(tmp_path_factory.mktemp("pag") / "pag")


@pytest.fixture(scope="module")
def big_stack(tmp_path_factory):
    """A ``(40, 240, 360)`` uint8 ``.npy`` stack with a disc drifting through z."""
    path = tmp_path_factory.mktemp("big") / "stack.npy"
    stack = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(Z, ROWS, COLS))
    rr, cc = np.mgrid[:ROWS, :COLS]
    for z in range(Z):
        stack[z] = np.where((rr - (60 + z)) ** 2 + (cc - (80 + 2 * z)) ** 2 <= 400, 200, 0)
    stack.flush()
    del stack
    return path


def _peak(argv, warm_options=("--range", "18:22")) -> tuple[int, int]:
    """The exit code and the ``tracemalloc`` peak (bytes) of one command run in this process.

    The same command runs first (with ``warm_options``: on four slices), so the modules it
    imports on first use (scipy, the ONNX helpers...) are loaded before the count starts: what
    is counted is the run's own data.
    """
    warm = [str(a) for a in argv]
    for flag, suffix in (("--out", ".warm.npy"), ("--table", ".warm.csv"), ("--csv", ".warm.csv")):
        if flag in warm:
            warm[warm.index(flag) + 1] += suffix
    assert main([*warm, *warm_options]) == 0
    tracemalloc.start()
    try:
        code = main([str(a) for a in argv])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return code, peak


def test_propagate_streams_a_stack_larger_than_its_memory_budget(pag, big_stack, tmp_path):
    # Before: the command built the (40, 240, 360) int32 labels in memory (13.8 MB) and wrote
    # them at the end (peak seen: far above the budget); now they fill a scratch memmap and go
    # to --out plane by plane (peak about 1 MB).
    out = tmp_path / "labels.npy"
    code, peak = _peak(["propagate", pag, big_stack, "--click", 3, 20, 60 + 20, 80 + 2 * 20,
                        "--out", out, "--table", tmp_path / "t.csv", "--quiet"])
    assert code == 0
    labels = np.load(out, mmap_mode="r")
    assert labels.shape == (Z, ROWS, COLS) and labels.dtype == np.int32
    truth = np.load(big_stack, mmap_mode="r")
    for z in (0, 20, Z - 1):  # the object was followed both ways from its seed
        both = ((labels[z] == 3) & (truth[z] > 0)).sum()
        assert both / ((labels[z] == 3) | (truth[z] > 0)).sum() > 0.6
    assert not list(tmp_path.glob(".sam3-scratch-*"))  # the scratch folder is gone
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB over the {BUDGET / 1e6:.1f} MB budget"


def test_repropagate_streams_its_seed_labels_and_output(pag, big_stack, tmp_path):
    # Before: the seed labels were read whole, copied and cast (three stacks in memory).
    truth = np.load(big_stack, mmap_mode="r")
    seeds = np.lib.format.open_memmap(tmp_path / "seeds.npy", mode="w+", dtype=np.int32,
                                      shape=truth.shape)
    for z in range(Z):
        seeds[z] = np.where(truth[z] > 0, 5, 0)
        seeds[z, :10, :10] = 9  # an id that is not carried: it must stay as it is
    seeds.flush()
    del seeds
    out = tmp_path / "re.npy"
    code, peak = _peak(["propagate", pag, big_stack, "--repropagate", "--seed-labels",
                        tmp_path / "seeds.npy", "--seed-slice", 20, "--ids", 5, "--out", out,
                        "--quiet"])
    assert code == 0
    labels = np.load(out, mmap_mode="r")
    assert labels.shape == (Z, ROWS, COLS) and (labels[:, :10, :10] == 9).all()
    for z in (0, 20, Z - 1):
        both = ((labels[z] == 5) & (truth[z] > 0)).sum()
        assert both / ((labels[z] == 5) | (truth[z] > 0)).sum() > 0.6
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB over the {BUDGET / 1e6:.1f} MB budget"


def test_refine_reads_and_writes_its_labels_plane_by_plane(pag, big_stack, tmp_path):
    # Before: the labels were read whole and cast to int32 (two stacks in memory).
    truth = np.load(big_stack, mmap_mode="r")
    given = np.lib.format.open_memmap(tmp_path / "given.npy", mode="w+", dtype=np.int32,
                                      shape=truth.shape)
    for z in range(Z):
        given[z, 60 + z - 10:60 + z + 10, 80 + 2 * z - 10:80 + 2 * z + 10] = 4  # a rough box
    given.flush()
    del given
    out = tmp_path / "fixed.npy"
    code, peak = _peak(["refine", pag, big_stack, "--labels", tmp_path / "given.npy", "--id", 4,
                        "--index", 20, "--click", 80, 120, "--out", out, "--quiet"], ())
    assert code == 0
    fixed, given = np.load(out, mmap_mode="r"), np.load(tmp_path / "given.npy", mmap_mode="r")
    assert fixed.shape == (Z, ROWS, COLS)
    assert all(np.array_equal(fixed[z], given[z]) for z in range(Z) if z != 20)

    def iou(plane):
        return ((plane == 4) & (truth[20] > 0)).sum() / ((plane == 4) | (truth[20] > 0)).sum()

    assert iou(fixed[20]) > iou(given[20]) + 0.05  # SAM's answer fits the disc better
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB over the {BUDGET / 1e6:.1f} MB budget"


def test_tracked_segment_all_streams_its_labels(pag, big_stack, tmp_path):
    # Before: segment-all --propagate-from built the whole int32 labels stack in memory.
    out = tmp_path / "tracked.npy"
    code, peak = _peak(["segment-all", pag, big_stack, "--propagate-from", 20,
                        "--points-per-side", 8, "--out", out, "--quiet"], ())
    assert code == 0
    labels = np.load(out, mmap_mode="r")
    truth = np.load(big_stack, mmap_mode="r")
    assert labels.shape == (Z, ROWS, COLS)
    for z in (0, 20, Z - 1):  # the disc is found on the key slice and carried both ways
        ids, counts = np.unique(labels[z][truth[z] > 0], return_counts=True)
        assert ids[np.argmax(counts)] != 0
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB over the {BUDGET / 1e6:.1f} MB budget"


def test_text_and_segment_all_stay_streamed(pag, big_stack, tmp_path):
    # These two streamed already (the guard against going back). Their per-plane work (a
    # decoder batch of full-size masks for segment-all) is not the point, so the check is that
    # the peak does not grow with the stack: 40 planes cost at most one plane more than 4.
    from napari_sam3_onnx.testing.tokenizer import write_toy_tokenizer
    from napari_sam3_onnx.testing.wkentaro import build_wkentaro_v03

    wk = build_wkentaro_v03(tmp_path / "wk")
    write_toy_tokenizer(wk)
    plane = ROWS * COLS * 4
    small = tmp_path / "small.npy"
    np.save(small, np.load(big_stack, mmap_mode="r")[18:22])
    for argv in (["text", wk, "{}", "--concepts", "nucleus"],
                 ["segment-all", pag, "{}", "--points-per-side", 4]):
        name = argv[0]
        _, few = _peak([*[small if a == "{}" else a for a in argv], "--out",
                        tmp_path / f"{name}4.npy", "--quiet"], ())
        code, peak = _peak([*[big_stack if a == "{}" else a for a in argv], "--out",
                            tmp_path / f"{name}.npy", "--quiet"], ("--slices", "18:22"))
        assert code == 0 and np.load(tmp_path / f"{name}.npy", mmap_mode="r").shape == (
            Z, ROWS, COLS)
        assert peak < few + plane, f"{name}: {peak / 1e6:.1f} MB for {Z} planes, " \
            f"{few / 1e6:.1f} MB for 4"


def _label_pair(shape, seed):
    """Asymmetric labels through z: objects over several planes, empty planes, lone ids."""
    rng = np.random.default_rng(seed)
    z, rows, cols = shape
    pred, gt = np.zeros(shape, np.int32), np.zeros(shape, np.uint16)
    rr, cc = np.mgrid[:rows, :cols]
    for k in range(1, 13):
        r, c, rad = rng.integers(5, rows - 5), rng.integers(5, cols - 5), rng.integers(3, 9)
        z0, z1 = sorted(rng.integers(0, z, 2))
        disc = (rr - r) ** 2 + (cc - c) ** 2 <= rad ** 2
        for p in range(z0, z1 + 1):
            gt[p][disc] = k
            if k % 5:  # every fifth true object is missed (an id only in the ground truth)
                shift = int(rng.integers(-2, 3))
                pred[p][np.roll(disc, shift, axis=1)] = 100 + k
    pred[0, :4, :6] = 999  # a prediction with no true object (an id only in the prediction)
    pred[z // 2], gt[z // 2] = 0, 0  # an empty plane in both
    gt[z - 1] = 0  # and one with predictions only
    return pred, gt


def test_streamed_matching_equals_the_whole_volume_matching(tmp_path):
    from napari_sam3_onnx import api
    from napari_sam3_onnx.engine.evaluation import (
        evaluate_labels,
        overlap_iou,
        streamed_iou,
        true_positives,
    )

    # the last planes are larger than contingency.BLOCK: counted in several blocks
    for seed, shape in ((0, (7, 41, 67)), (1, (5, 90, 33)), (2, (3, 30, 50)), (5, (4, 190, 203))):
        pred, gt = _label_pair(shape, seed)
        iou, p_ids, g_ids = overlap_iou(pred, gt)  # the whole-volume reference
        s_iou, s_p, s_g = streamed_iou(pred, gt)
        assert len(p_ids) > 3 and len(g_ids) > 3 and 999 in p_ids
        np.testing.assert_array_equal(s_iou, iou)  # bit for bit
        np.testing.assert_array_equal(s_p, p_ids)
        np.testing.assert_array_equal(s_g, g_ids)
        assert s_p.dtype == p_ids.dtype and s_g.dtype == g_ids.dtype
        ev = evaluate_labels(pred, gt)
        assert (ev.n_pred, ev.n_true) == (len(p_ids), len(g_ids))
        for c in ev.counts:
            tp = true_positives(iou, c.threshold)
            assert (c.tp, c.fp, c.fn) == (tp, len(p_ids) - tp, len(g_ids) - tp)
        np.save(tmp_path / "p.npy", pred)
        np.save(tmp_path / "g.npy", gt)
        from_files = api.evaluate(tmp_path / "p.npy", tmp_path / "g.npy", names=["image"])
        assert from_files.rows() == api.evaluate(pred, gt, names=["image"]).rows() == [ev.row()]
    flat_p, flat_g = _label_pair((3, 40, 52), 3)
    for a, b in ((flat_p[0], flat_g[0]), (np.zeros((6, 9), int), np.zeros((6, 9), int))):
        got, want = streamed_iou(a, b), overlap_iou(a, b)
        assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))


def test_evaluate_streams_stacks_larger_than_its_memory_budget(tmp_path):
    # Before: np.unique over each whole volume (a sorted copy plus an int64 inverse: about
    # 3.5 stacks' worth, far above the budget); now one plane pair at a time (peak ~2 MB).
    import csv

    from napari_sam3_onnx.engine.evaluation import overlap_iou, true_positives

    pred, gt = _label_pair((Z, ROWS, COLS), 4)
    for name, arr in (("pred", pred), ("truth", gt)):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "stack.npy", arr)
    iou, p_ids, g_ids = overlap_iou(pred, gt)
    del pred, gt
    table = tmp_path / "scores.csv"
    code, peak = _peak(["evaluate", tmp_path / "pred", tmp_path / "truth", "--csv", table], ())
    assert code == 0
    (row,) = list(csv.DictReader(open(table)))
    tp = true_positives(iou, 0.5)
    assert (int(row["n_pred"]), int(row["n_true"]), int(row["tp50"])) == (
        len(p_ids), len(g_ids), tp)
    assert tp > 3 and int(row["fn50"]) == len(g_ids) - tp
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB over the {BUDGET / 1e6:.1f} MB budget"


@pytest.mark.parametrize("through", [False, True])
def test_text_exemplars_from_streams_its_exemplars_and_labels(big_stack, tmp_path, through):
    # Before: the search built the (40, 240, 360) int32 labels in memory (13.8 MB) and the
    # command read the exemplar labels whole; now both go plane by plane (exemplars read per
    # plane, labels into a scratch memmap streamed to --out).
    from napari_sam3_onnx import api
    from napari_sam3_onnx.toy import bundle as toy_bundle

    toy = toy_bundle.build(tmp_path / "toy")
    truth = np.load(big_stack, mmap_mode="r")
    ex = np.lib.format.open_memmap(tmp_path / "ex.npy", mode="w+", dtype=np.int32,
                                   shape=truth.shape)
    ex[20] = np.where(truth[20] > 0, 6, 0)  # one exemplar: the disc on plane 20
    ex.flush()
    del ex
    out = tmp_path / "like.npy"
    code, peak = _peak(["text", toy, big_stack, "--exemplars-from", tmp_path / "ex.npy",
                        *(["--through-stack"] if through else []), "--out", out,
                        "--table", tmp_path / "t.csv", "--quiet"], ())
    assert code == 0
    labels = np.load(out, mmap_mode="r")
    assert labels.shape == (Z, ROWS, COLS) and labels.dtype == np.int32
    want = api.search_like(toy, np.load(big_stack), np.load(tmp_path / "ex.npy"),
                           through_stack=through).labels  # the in-memory API, same answer
    assert all(np.array_equal(labels[z], want[z]) for z in range(Z))
    for z in ((0, 20, Z - 1) if through else (20,)):  # the disc found (and carried) with one id
        both = ((labels[z] == 1) & (truth[z] > 0)).sum()
        assert both / ((labels[z] == 1) | (truth[z] > 0)).sum() > 0.6, z
    if not through:
        assert not labels[19].any() and not labels[21].any()
    assert peak < BUDGET, f"peak {peak / 1e6:.1f} MB over the {BUDGET / 1e6:.1f} MB budget"
