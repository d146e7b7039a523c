"""The gate's fp32 reference decisions on disk: one ``.npz`` of plain arrays, no pickle.

:func:`.gate.decisions` of a full-depth fp32 bundle costs minutes, so ``--reference-cache FILE``
keeps it for later runs. The file is an ``.npz`` read with ``allow_pickle=False``: every array
of the decisions is one member (``a0``, ``a1``, ...), and their nesting (dicts with ``str`` or
``int`` keys, lists, tuples, Python scalars) is a JSON layout in the member ``layout``, beside a
format marker and the fp32 bundle's key (its manifest's file digests). Opening a cache therefore
never runs code from the file, and a file that is not such a cache is recognised and left alone
(:class:`NotADecisionCache`) instead of being overwritten.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from .manifest import write_atomically

#: Written into every cache; a file without it is not one of ours.
FORMAT = "napari-sam3-onnx gate reference decisions, v1"


class NotADecisionCache(ValueError):
    """``path`` exists but is not a reference cache written by :func:`save`."""


def save(path: Path, key: dict, decisions: dict) -> None:
    """Write ``decisions`` (arrays nested in dicts / lists / tuples) and ``key`` to ``path``.

    Atomic: written to a new temporary file beside ``path`` and renamed over it, so an
    interrupted run leaves the previous cache (or nothing), never half a file.
    """
    arrays: dict[str, np.ndarray] = {}
    layout = _encode(decisions, arrays)
    members = {**arrays, "format": np.array(FORMAT), "key": np.array(json.dumps(key)),
               "layout": np.array(json.dumps(layout))}
    buffer = io.BytesIO()
    np.savez(buffer, **members)  # type: ignore[arg-type]
    write_atomically(path, buffer.getvalue())


def load(path: Path) -> tuple[dict, dict]:
    """``(key, decisions)`` from a cache written by :func:`save`.

    Raises
    ------
    NotADecisionCache
        ``path`` is not an ``.npz`` of this format (another file, a pickle of an older
        version, a truncated write).
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            if "format" not in data.files or str(data["format"]) != FORMAT:
                raise NotADecisionCache(f"{path} is not a gate reference cache")
            key = json.loads(str(data["key"]))
            layout = json.loads(str(data["layout"]))
            arrays = {name: data[name] for name in data.files
                      if name not in ("format", "key", "layout")}
            decisions = _decode(layout, arrays)
    except NotADecisionCache:
        raise
    except Exception as exc:  # not a zip, not .npy members, pickled objects, bad layout
        raise NotADecisionCache(f"{path} is not a gate reference cache ({exc})") from exc
    return key, decisions


def check_writable(path: Path | None) -> str | None:
    """Why ``path`` cannot serve as a reference cache (a file of something else), or None."""
    if path is None or not path.exists():
        return None if path is None or path.parent.is_dir() else (
            f"--reference-cache: the folder {path.parent} does not exist")
    if not path.is_file():
        return f"--reference-cache {path} is not a file"
    try:
        load(path)
    except NotADecisionCache as exc:
        return (f"--reference-cache: {exc}; it is left as it is - name a new file (caches "
                "written before this format were pickles: remove such a file yourself)")
    return None


def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        if np.asarray(value).dtype.hasobject:
            raise TypeError("cannot cache an object array (it would need pickle)")
        name = f"a{len(arrays)}"
        arrays[name] = np.asarray(value)
        return {"scalar" if isinstance(value, np.generic) else "array": name}
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            if isinstance(k, bool) or not isinstance(k, str | int):
                raise TypeError(f"cache keys must be str or int, not {type(k).__name__}")
            items.append(["int" if isinstance(k, int) else "str", k, _encode(v, arrays)])
        return {"dict": items}
    if isinstance(value, list | tuple):
        return {"list" if isinstance(value, list) else "tuple":
                [_encode(v, arrays) for v in value]}
    if value is None or isinstance(value, bool | int | float | str):
        return {"value": value}
    raise TypeError(f"cannot cache a {type(value).__name__}")


def _decode(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    (kind, body), = node.items()
    if kind == "array":
        return arrays[body]
    if kind == "scalar":
        return arrays[body][()]
    if kind == "dict":
        return {(int(k) if t == "int" else str(k)): _decode(v, arrays) for t, k, v in body}
    if kind == "list":
        return [_decode(v, arrays) for v in body]
    if kind == "tuple":
        return tuple(_decode(v, arrays) for v in body)
    if kind == "value":
        return body
    raise NotADecisionCache(f"unknown entry {kind!r} in the cache's layout")
