"""Helpers shared by the tracker-adapter tests (pagarcia and jax-video test bundles)."""

import numpy as np

from napari_sam3_onnx.models.imageops import resize_bilinear
from napari_sam3_onnx.testing.jax_video import build_jax_video
from napari_sam3_onnx.testing.pagarcia import build_pagarcia

BUILDERS = {"pagarcia": build_pagarcia, "jax": build_jax_video}
SHAPE = (60, 90)
BLOBS = ((15, 20, 6), (40, 65, 7))


def rgb(gray):
    return np.repeat(gray[..., None], 3, axis=2)


def xy(adapter, points_rc, shape=SHAPE):
    """Slice (row, col) pixel centres -> model-input (x, y)."""
    p = np.asarray(points_rc, np.float64).reshape(-1, 2) + 0.5
    h, w = adapter.input_size
    return np.stack([p[:, 1] * w / shape[1], p[:, 0] * h / shape[0]], axis=1).astype(np.float32)


def best_mask(cands, shape=SHAPE):
    low = cands.logits[int(np.argmax(cands.iou))]
    return resize_bilinear(low, shape, antialias=False) > 0


def iou(a, b):
    return (a & b).sum() / (a | b).sum()


def top_feature(emb):
    return emb.features["image_embeddings.2" if "image_embeddings.2" in emb.features else "feats2"]


def level0(emb):
    return emb.features["image_embeddings.0" if "image_embeddings.0" in emb.features else "feats0"]


def per_channel(frame):
    """Channel values of a memory (broadcast over the grid in the test graphs)."""
    f = frame.features
    return f.mean(axis=(1, 2)) if f.ndim == 3 else f.mean(axis=0)


def spy_feeds(adapter, monkeypatch):
    """Record the feeds of every decoder run (a list, appended to in call order)."""
    seen = []
    for dec in adapter.decoders.values():
        run = dec.run
        monkeypatch.setattr(dec, "run", lambda names, feeds, run=run: seen.append(feeds)
                            or run(names, feeds))
    return seen


def disc_logits(a, x, y, radius, inside=10.0):
    """Low-res logits of a disc at model (x, y): +inside within ``radius``, -inside outside."""
    lm, (h, w) = a.mask_size[0], a.input_size
    cy, cx = (np.mgrid[:lm, :lm] + 0.5) * np.array([h / lm, w / lm])[:, None, None]
    return np.where(np.hypot(cx - x, cy - y) <= radius, inside, -inside).astype(np.float32)
