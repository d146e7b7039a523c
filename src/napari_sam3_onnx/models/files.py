"""Reading a bundle's side files (manifest, constants) with errors that name the file.

A truncated ``constants.npz`` or a hand-edited ``manifest.json`` otherwise surfaces as a
``zipfile.BadZipFile`` or ``json.JSONDecodeError`` traceback with no file name in it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .errors import BundleFileError, ModelFileUnreadableError


def read_json(path: Path | str) -> dict:
    """The JSON object in ``path``.

    Raises
    ------
    ModelFileUnreadableError
        Permission denied.
    BundleFileError
        Not UTF-8 JSON, or not an object at its top.
    """
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except PermissionError as exc:
        raise ModelFileUnreadableError(path) from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleFileError(path, f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise BundleFileError(path, f"expected a JSON object, found {type(value).__name__}")
    return value


def read_npz(path: Path | str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path``, loaded (no pickled objects).

    Raises
    ------
    ModelFileUnreadableError
        Permission denied.
    BundleFileError
        Truncated, not a zip of ``.npy`` arrays, or holding pickled objects.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k]) for k in data.files}
    except PermissionError as exc:
        raise ModelFileUnreadableError(path) from exc
    except Exception as exc:  # BadZipFile, EOFError, ValueError, OSError from a damaged file
        raise BundleFileError(path, f"{type(exc).__name__}: {exc}") from exc
