"""Shared fixtures: test bundles built with onnx.helper, asymmetric images with planted blobs."""

from __future__ import annotations

import os

import numpy as np
import pytest

from napari_sam3_onnx.models.bundle_spec import HOME_ENV
from napari_sam3_onnx.testing.hf_tracker import build_hf_tracker


@pytest.fixture(scope="session", autouse=True)
def _private_data_home(tmp_path_factory):
    """Keep the tests' models (the toy built by the widget) out of the user's cache."""
    old = os.environ.get(HOME_ENV)
    os.environ[HOME_ENV] = str(tmp_path_factory.mktemp("data_home"))
    yield
    if old is None:
        os.environ.pop(HOME_ENV, None)
    else:
        os.environ[HOME_ENV] = old


@pytest.fixture(scope="session")
def hf_bundle(tmp_path_factory):
    """Folder with the small onnx-community tracker-pair test graphs."""
    return build_hf_tracker(tmp_path_factory.mktemp("hf_tracker"))


def blob_image(shape=(60, 90), blobs=((15, 20, 6), (40, 65, 7)), value=200, dtype=np.uint8):
    """A dark ``(rows, cols)`` image with bright discs at ``(row, col, radius)``."""
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    img = np.zeros(shape, dtype=dtype)
    for r, c, rad in blobs:
        img[(rr - r) ** 2 + (cc - c) ** 2 <= rad**2] = value
    return img


def disc(shape, r, c, rad):
    rr, cc = np.mgrid[: shape[0], : shape[1]]
    return (rr - r) ** 2 + (cc - c) ** 2 <= rad**2


@pytest.fixture(autouse=True)
def _private_hugging_face_home(tmp_path_factory, monkeypatch):
    """Every test gets its own empty Hugging Face home: no real cache, token or login is used.

    ``huggingface_hub`` reads ``$HF_HOME`` when it is imported, so its constants are moved too.
    """
    home = tmp_path_factory.mktemp("hf_home")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    try:
        from huggingface_hub import constants
    except ImportError:
        return
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_XET_CACHE", str(home / "xet"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
