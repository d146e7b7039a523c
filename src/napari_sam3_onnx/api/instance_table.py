"""The instance table: one schema for the dock's layer features and the CLI's CSV.

A text search (``kind="text"``) or an automatic segmentation (``kind="automatic"``) lists one
row per instance and plane. The columns, in order:

================  =======  ====================================================================
column            dtype    meaning
================  =======  ====================================================================
``label``         int64    the instance's value in the labels array
``concept``       str      (text only) the phrase that found it ("" for exemplars alone)
``score``         float64  text: SAM 3's detection score; automatic: the predicted IoU; in [0, 1],
                           rounded to :data:`DECIMALS` decimals
``stability``     float64  (automatic only) SAM's stability score, :data:`DECIMALS` decimals
``area_px``       int64    its pixels on that plane
``index_<k>``     int64    its plane's index along leading axis k of the labels (none for 2-D)
``bbox_row0``...  int64    first and last row and column it covers
================  =======  ====================================================================

The CLI writes these columns as CSV (``--table``); the dock puts the same columns, with the same
values, into the labels layer's ``features``, with napari's ``index`` column (= ``label``) in
front, which is how napari finds the row of the label under the cursor. No napari, no pandas
here: rows are dicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Decimals of the float columns (score, stability).
DECIMALS = 6
#: Columns before the ``index_<k>`` columns, per kind.
HEAD = {"text": ("label", "concept", "score", "area_px"),
        "automatic": ("label", "score", "stability", "area_px")}
#: Bounding-box columns (after the ``index_<k>`` columns).
BOX_COLUMNS = ("bbox_row0", "bbox_col0", "bbox_row1", "bbox_col1")
#: dtype of each column (``index_<k>`` columns: int64).
DTYPES = {"label": "int64", "concept": "object", "score": "float64", "stability": "float64",
          "area_px": "int64", **dict.fromkeys(BOX_COLUMNS, "int64")}


def columns(kind: str, n_lead: int) -> list[str]:
    """The table's columns for ``kind`` (``"text"`` or ``"automatic"``) and ``n_lead`` axes.

    Raises
    ------
    KeyError
        An unknown kind.
    """
    return [*HEAD[kind], *(f"index_{k}" for k in range(n_lead)), *BOX_COLUMNS]


def dtypes(kind: str, n_lead: int) -> dict[str, str]:
    """``{column: dtype}`` in column order (numpy / pandas dtype names)."""
    return {c: DTYPES.get(c, "int64") for c in columns(kind, n_lead)}


def row(inst: Any, kind: str) -> dict:
    """One instance's row (an engine ``Instance`` or ``AutoInstance``).

    The instance gives ``id``, ``score``, ``area``, ``index`` (its plane's leading index),
    ``box_rc`` ``(r0, c0, r1, c1)`` and, by kind, ``concept`` or ``stability``.
    """
    out: dict[str, Any] = {"label": int(inst.id)}
    if kind == "text":
        out["concept"] = str(inst.concept)
    out["score"] = round(float(inst.score), DECIMALS)
    if kind == "automatic":
        out["stability"] = round(float(inst.stability), DECIMALS)
    out["area_px"] = int(inst.area)
    out.update({f"index_{k}": int(i) for k, i in enumerate(inst.index)})
    out.update({c: int(v) for c, v in zip(BOX_COLUMNS, inst.box_rc, strict=True)})
    return out


def rows(instances: Iterable[Any], kind: str) -> list[dict]:
    """One :func:`row` per instance, in order."""
    return [row(inst, kind) for inst in instances]
