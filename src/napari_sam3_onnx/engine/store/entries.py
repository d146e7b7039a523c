"""Reading one store entry's arrays back, and what every entry of a store must look like.

An entry is served only when its metadata is whole (model input size, image shape, one dtype
per feature), every array reads back with its recorded shape, dtype and checksum, and, once the
store knows it, the features have the names, shapes and dtypes of the store's embeddings: the
**entry spec**, recorded in the store's root from the first embedding written into it (a bundle's
encoder always gives the same). An entry of another shape (a damaged or hand-edited store) is
therefore a miss that is encoded again, never features a decoder fails on.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from napari_sam3_onnx.engine.store import files as sf

#: Root attribute (inside the store's own attributes) holding the entry spec.
SPEC_KEY = "entry_spec"


def _pair(value) -> bool:
    return (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value))


def meta_problem(meta: Mapping) -> str | None:
    """Why an entry's metadata cannot describe an embedding (None: it can)."""
    if not _pair(meta.get("input_size")) or not _pair(meta.get("image_shape")):
        return "no model input size or image shape"
    features, records = meta.get("features"), meta.get("arrays")
    if not isinstance(features, list) or not features or not isinstance(records, list):
        return "no features"
    if len(records) != len(features):
        return "as many arrays as features are not recorded"
    try:
        names = [str(name) for name, dtype in features if np.dtype(dtype) is not None]
    except (TypeError, ValueError):
        return "a feature without a dtype"
    if len(set(names)) != len(names):
        return "two features of one name"
    return None


def entry_spec(meta: Mapping) -> dict:
    """The spec of the complete entry ``meta``: model input size, feature names, shapes, dtypes."""
    return {"input_size": [int(v) for v in meta["input_size"]],
            "features": [[str(name), [int(s) for s in rec["shape"]], str(dtype)]
                         for (name, dtype), rec in zip(meta["features"], meta["arrays"],
                                                       strict=True)]}


def spec_problem(meta: Mapping, spec: Mapping | None) -> str | None:
    """How the entry ``meta`` differs from the store's ``spec`` (None: it does not, or no spec)."""
    if not isinstance(spec, Mapping):
        return None
    mine = entry_spec(meta)
    if mine == {k: spec.get(k) for k in mine}:
        return None
    shapes = ", ".join(f"{n} {tuple(s)}" for n, s, _ in mine["features"])
    return f"features {shapes} at input {tuple(mine['input_size'])}, not the store's"


def read_arrays(group, meta: Mapping, spec: Mapping | None = None
                ) -> dict[str, np.ndarray] | None:
    """An entry's features as stored, or None if the entry cannot be served.

    None when its metadata is incomplete (:func:`meta_problem`), an array is missing, has
    another shape or dtype than recorded or fails its checksum, or the entry does not match
    the store's ``spec`` (:func:`spec_problem`).
    """
    try:
        if meta_problem(meta) or spec_problem(meta, spec):
            return None
        out = {}
        for i, ((name, _), rec) in enumerate(zip(meta["features"], meta["arrays"],
                                                 strict=True)):
            arr = np.asarray(group[f"f{i}"][...])
            if (list(arr.shape) != list(rec["shape"]) or arr.dtype.str != rec["dtype"]
                    or sf.checksum(arr) != rec[sf.CHECKSUM]):
                return None
            out[name] = arr
        return out
    except Exception:  # a lost array or chunk file, damaged metadata, a failed decompression
        return None
