"""Stopping a graph run from another thread (RunOptions.terminate, InferRequest.cancel)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from _slow_graph import SlowAdapter, build_slow_graph
from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.models.preempt import CancelToken, Preempted, current_token, preemptible
from napari_sam3_onnx.models.runtime import LazySession


@pytest.fixture(scope="module")
def slow_graph(tmp_path_factory):
    return build_slow_graph(tmp_path_factory.mktemp("slow") / "slow.onnx")


def _feed(session):
    side = int(session.signature.input("x").shape[0])
    return {"x": np.ones((side, side), np.float32)}


def _timed(call):
    t0 = time.monotonic()
    try:
        return call(), time.monotonic() - t0
    except Exception as exc:
        return exc, time.monotonic() - t0


def test_terminate_stops_an_onnxruntime_run_early(slow_graph):
    session = LazySession(slow_graph)
    feed = _feed(session)
    session.run(["y"], feed)  # load and warm up
    full, whole = _timed(lambda: session.run(["y"], feed))
    assert isinstance(full, dict)
    token = CancelToken()

    def stopped():
        with preemptible(token):
            return session.run(["y"], feed)

    threading.Timer(whole / 10, token.cancel).start()
    outcome, took = _timed(stopped)
    assert isinstance(outcome, Preempted)  # not the runtime's bare Fail, never a result
    assert "terminate" in str(outcome.__cause__)
    assert took < whole / 2
    assert session.runs == 2  # the stopped run is not counted as a run
    # the session works again afterwards, with the same answer as before
    again = session.run(["y"], feed)
    np.testing.assert_array_equal(again["y"], full["y"])


def test_a_cancelled_token_refuses_runs_and_other_threads_are_untouched(slow_graph):
    session = LazySession(slow_graph)
    feed = _feed(session)
    token = CancelToken()
    token.cancel()
    with preemptible(token), pytest.raises(Preempted):
        session.run(["y"], feed)
    assert current_token() is None
    # a token in one thread does not reach another thread's run
    results = []
    with preemptible(token):
        worker = threading.Thread(target=lambda: results.append(session.run(["y"], feed)))
        worker.start()
        worker.join(60)
    assert len(results) == 1 and results[0]["y"].shape == feed["x"].shape


def test_a_stopped_encode_caches_nothing_and_the_next_one_works(slow_graph):
    adapter = SlowAdapter(slow_graph)
    encoder = SliceEncoder(adapter)  # type: ignore[arg-type]
    stack = np.arange(3 * 5 * 9, dtype=np.uint8).reshape(3, 5, 9)
    ref = SliceRef(stack, (1,), source="s")
    token = CancelToken()
    threading.Timer(0.05, token.cancel).start()
    with pytest.raises(Preempted):
        encoder.embed(ref, cancel=token)
    assert encoder.cached(ref) is None and len(encoder.cache) == 0
    assert encoder.encoder_calls == 0
    emb = encoder.embed(ref)  # no token: runs to its end
    np.testing.assert_array_equal(emb.features["f"][0, 0], stack[1])
    assert encoder.cached(ref) is emb


def test_openvino_cancel_stops_its_run(slow_graph, tmp_path):
    pytest.importorskip("openvino")
    from napari_sam3_onnx.models.openvino_runtime import OpenVinoSession

    session = OpenVinoSession(slow_graph, "f32", 0, None)
    feed = {"x": np.ones((384, 384), np.float32)}
    session.run(["y"], feed)
    full, whole = _timed(lambda: session.run(["y"], feed))
    token = CancelToken()
    threading.Timer(whole / 10, token.cancel).start()
    outcome, took = _timed(lambda: session.run(["y"], feed, token))
    assert isinstance(outcome, Preempted) and took < whole / 2
    np.testing.assert_array_equal(session.run(["y"], feed)[0], full[0])
