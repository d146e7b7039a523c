"""What encode ahead plans: the planes ahead of the user, series images not read yet, memory.

The scheduler itself is :mod:`napari_sam3_onnx.engine.encode_ahead`; these are its plain
values and pure functions (no threads).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from napari_sam3_onnx.engine.encoding import SliceRef

#: Planes encoded beyond the current one by default.
DEFAULT_AHEAD = 2
#: Size assumed for one embedding before any is cached (SAM 3's three levels are ~110 MB).
DEFAULT_EMBEDDING_BYTES = 128 << 20


@dataclass(frozen=True)
class Pending:
    """A plane known by name until it is read: the next image of a series, not open yet.

    Attributes
    ----------
    name : Hashable
        Stays the same over re-plans (e.g. the series item's key), so a plan made again while
        it is read or encoded keeps it going rather than stopping it.
    resolve : callable
        ``resolve() -> SliceRef | None``, called in the background thread: reads the image
        and returns its plane (None: nothing to encode, e.g. a tiled plane).
    """

    name: Hashable
    resolve: Callable[[], SliceRef | None] = field(compare=False, repr=False)


#: What the scheduler may be asked to encode: a plane, or one still to be read.
Planned = SliceRef | Pending
#: ``series(count)``: the next ``count`` images of a series (may be fewer), as planes or
#: :class:`Pending` ones. Called on the caller's thread: it must be cheap.
SeriesHook = Callable[[int], Sequence[Planned]]


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The memory the system can give without swapping (``MemAvailable``), None if unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_allows(available: int | None, embedding_bytes: int = DEFAULT_EMBEDDING_BYTES) -> bool:
    """Whether ``available`` bytes hold two more embeddings (unknown memory: yes)."""
    return available is None or available >= 2 * embedding_bytes


def planes_ahead(ref: SliceRef, shape: Sequence[int], direction: int,
                 count: int) -> list[SliceRef]:
    """Up to ``count`` planes after ``ref`` along its last leading axis, ``direction`` ±1.

    ``shape`` is the leading axes' shape (or the whole data shape: only its first
    ``len(ref.index)`` entries are read). A 2-D image has none.
    """
    if not ref.index or count <= 0:
        return []
    axis = len(ref.index) - 1
    out = []
    for step in range(1, count + 1):
        k = ref.index[axis] + step * (1 if direction >= 0 else -1)
        if not 0 <= k < shape[axis]:
            break
        out.append(replace(ref, index=(*ref.index[:axis], k)))
    return out


def plane_label(ref: SliceRef) -> str:
    """``"z=13"`` (the last leading index), or ``"the next image"`` for a 2-D image."""
    return f"z={ref.index[-1]}" if ref.index else "the next image"
