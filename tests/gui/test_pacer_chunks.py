"""A batch of results goes to the Qt thread in chunks that fit the budget, the event loop
turning between them (:class:`~napari_sam3_onnx._napari.pacing.Pacer`).

The cost of applying a result is simulated on an injected clock, so chunk sizes do not depend
on this machine's speed; "the event loop turned" is seen by a zero-interval timer posted before
the flush, which can only fire between two chunks.
"""

from __future__ import annotations

import pytest
from qtpy.QtCore import QTimer

from napari_sam3_onnx._napari.pacing import Pacer

pytestmark = pytest.mark.gui


class CostlyApply:
    """``apply`` that costs ``cost_s`` per result on a fake clock, and logs what it got."""

    def __init__(self, cost_s: float) -> None:
        self.now, self.cost = 0.0, cost_s
        self.chunks: list[list[int]] = []
        self.events: list[str] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, items: list[int]) -> None:
        self.chunks.append(list(items))
        self.events.append(f"chunk {len(items)}")
        self.now += self.cost * len(items)


def _pacer(apply: CostlyApply, budget_ms: float = 40) -> Pacer:
    return Pacer(apply, interval_ms=100, budget_ms=budget_ms, clock=apply.clock)


def test_a_large_last_batch_is_applied_in_budget_sized_chunks_with_the_loop_turning(qtbot):
    apply = CostlyApply(cost_s=0.005)  # 5 ms a result: 8 fit a 40 ms chunk
    pacer, ended = _pacer(apply), []
    for i in range(40):
        pacer.push(i)
    QTimer.singleShot(0, lambda: apply.events.append("loop turned"))
    pacer.flush(then=lambda: ended.append(pacer.pending))
    assert apply.chunks == [[0]]  # the first chunk of all: one result, to learn its cost
    qtbot.waitUntil(lambda: bool(ended), timeout=5000)
    assert [len(c) for c in apply.chunks] == [1, 8, 8, 8, 8, 7]
    assert [i for c in apply.chunks for i in c] == list(range(40))  # every result once, in order
    assert apply.events.index("loop turned") == 1  # between the first two chunks
    assert ended == [0] and pacer.batches == 1 and pacer.chunks == 6


def test_a_result_slower_than_the_budget_goes_alone(qtbot):
    apply = CostlyApply(cost_s=0.2)
    pacer, ended = _pacer(apply), []
    for i in range(3):
        pacer.push(i)
    pacer.flush(then=lambda: ended.append(True))
    qtbot.waitUntil(lambda: bool(ended), timeout=5000)
    assert apply.chunks == [[0], [1], [2]]


def test_results_pushed_while_a_batch_is_in_chunks_come_after_it(qtbot):
    apply = CostlyApply(cost_s=0.02)  # 2 a chunk
    pacer, ended = _pacer(apply), []
    for i in range(5):
        pacer.push(i)
    pacer.flush()
    pacer.push(5)  # arrives while the batch is cut
    qtbot.waitUntil(lambda: pacer.pending == 1, timeout=5000)  # the cut batch is in
    apply.now += 0.1  # its own interval passes
    qtbot.waitUntil(lambda: pacer.pending == 0, timeout=5000)
    pacer.flush(then=lambda: ended.append(True))
    qtbot.waitUntil(lambda: bool(ended), timeout=5000)
    assert [i for c in apply.chunks for i in c] == list(range(6))


def test_a_flush_with_nothing_waiting_ends_at_once_and_a_drop_still_ends_the_run(qtbot):
    apply = CostlyApply(cost_s=0.01)
    pacer, ended = _pacer(apply), []
    pacer.flush(then=lambda: ended.append("empty"))
    assert ended == ["empty"] and apply.chunks == []
    for i in range(20):
        pacer.push(i)
    pacer.flush(then=lambda: ended.append("dropped"))
    pacer.drop()  # the run's layer went away while its last batch was being applied
    assert ended == ["empty", "dropped"] and pacer.pending == 0
    assert apply.chunks == [[0]]
