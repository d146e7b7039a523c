"""A small ONNX graph that is slow on purpose (a chain of matmuls), and an adapter around it.

The chain gives onnxruntime many operators, so ``RunOptions.terminate`` (read between operators)
really interrupts it; a test can then tell a stopped run from one that ran to its end.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from napari_sam3_onnx.models.runtime import LazySession
from napari_sam3_onnx.models.values import Embedding
from napari_sam3_onnx.testing.slow_graph import build_slow_graph

__all__ = ["SlowAdapter", "build_slow_graph"]


class SlowAdapter:
    """Just enough of an adapter for :class:`SliceEncoder`: ``encode`` runs the slow graph.

    The embedding holds the plane's pixels (so a wrong plane is visible) and the graph's output
    sum; ``started`` and ``finished`` list the largest pixel of the planes whose encode began and
    ended (a stopped encode is in ``started`` only).
    """

    def __init__(self, graph: Path) -> None:
        self.session = LazySession(graph)
        self.side = int(self.session.signature.input("x").shape[0])
        self.started: list[float] = []
        self.finished: list[float] = []
        self.lock = threading.Lock()

    def encode(self, rgb: np.ndarray) -> Embedding:
        with self.lock:
            self.started.append(float(rgb.max()))
        x = np.ones((self.side, self.side), np.float32)
        y = self.session.run(["y"], {"x": x})["y"]
        feats = {"f": rgb.transpose(2, 0, 1)[None].astype(np.float32),
                 "y": np.full((1, 1), y.sum(), np.float32)}
        with self.lock:
            self.finished.append(float(rgb.max()))
        return Embedding(feats, (8, 8), rgb.shape[:2])

    def lacks(self, _emb, _need) -> bool:
        return False
