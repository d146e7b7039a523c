"""A Labels layer's instance table (``features``): the CLI's CSV columns, napari's ``index``.

The columns, dtypes and decimals are the instance table's
(:mod:`~napari_sam3_onnx.api.instance_table`), so a table taken from the dock and the CLI's
``--table`` CSV of the same run are the same; napari's ``index`` column (the label value) comes
first, which is how napari finds the row of the label under the cursor (napari's
``Labels._make_label_index``): hovering an instance shows its row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from napari.layers import Labels

from napari_sam3_onnx.api import instance_table


def feature_rows(instances: Iterable[Any], kind: str, n_lead: int) -> pd.DataFrame:
    """``index`` + :func:`~napari_sam3_onnx.api.instance_table.columns` rows, typed."""
    rows = instance_table.rows(instances, kind)
    table = pd.DataFrame(rows, columns=instance_table.columns(kind, n_lead))
    table = table.astype(instance_table.dtypes(kind, n_lead))
    table.insert(0, "index", table["label"].to_numpy(np.int64))
    return table


def table_of(layer: Labels) -> pd.DataFrame:
    """The layer's instance table without napari's ``index`` column (as the CLI writes it)."""
    return pd.DataFrame(layer.features).drop(columns="index", errors="ignore")


def append_features(layer: Labels, rows: pd.DataFrame) -> None:
    """Add ``rows`` to the layer's table (an existing table without ``index`` keeps its mapping)."""
    old = pd.DataFrame(layer.features)
    if len(old) and "index" not in old:
        old.insert(0, "index", np.arange(len(old)))  # napari's implicit row k <-> label k
    table = rows if not len(old) else pd.concat([old, rows], ignore_index=True)
    layer.features = table.reset_index(drop=True)
