"""Which image group of a store holds which image file.

Image groups are named after their file (``cells`` for ``cells.tif``), so two files of one name
in different folders, used in separate runs, would share a group and replace each other's
entries run after run. A group created for a file therefore records the file's resolved path
(its ``source``), and another file of that name gets the next free name: ``cells.2``,
``cells.3``... A group made before sources were recorded, or for an array rather than a file,
has no source and is used as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from napari_sam3_onnx.engine.store import files as sf
from napari_sam3_onnx.engine.store.keys import safe_name

#: Group attribute naming the file an image group was created for.
SOURCE_KEY = "napari_sam3_onnx_image"
#: How many files of one name a store tells apart.
MAX_NAMESAKES = 1000


def source_of(path: Path | str) -> str:
    """The identity of an image file in a store: its absolute path, links resolved."""
    return os.path.realpath(path)


def _owner(folder: Path) -> str | None:
    """The source recorded in the group at ``folder`` ("" when it records none)."""
    try:
        meta = json.loads((folder / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = (meta.get("attributes") or {}).get(SOURCE_KEY) if isinstance(meta, dict) else None
    return str(record.get("source", "")) if isinstance(record, dict) else ""


def claim_image(root: Path | str, name: str, source: str, create: bool = True) -> str:
    """The name under which the file ``source`` is kept in the store at ``root``.

    Parameters
    ----------
    root : Path or str
        The store folder.
    name : str
        The image's name (from its file name).
    source : str
        :func:`source_of` the file.
    create : bool
        Create the group (recording ``source``) when the name is free; False for a store
        opened read-only (the free name is returned, nothing is written).

    Returns
    -------
    str
        ``name`` if its group is free, made for ``source``, or records no source; otherwise
        the first ``name.N`` that is.
    """
    root = Path(root)
    for n in range(1, MAX_NAMESAKES + 1):
        candidate = name if n == 1 else f"{name}.{n}"
        folder = root / safe_name(candidate)
        owner = _owner(folder)
        if owner is None and create:
            sf.create_node(folder, {SOURCE_KEY: {"source": source}})
            owner = _owner(folder)  # ours, or the winner of a race
        if owner is None or owner in ("", source):
            return candidate
    raise FileExistsError(f"{MAX_NAMESAKES} images named {name!r} in the store {root}")
