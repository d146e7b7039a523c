"""3-D objects by propagation: segment one key plane automatically, carry each object through z.

The alternative to linking per-plane results (:mod:`~..engine.automatic.linking`): every object
the automatic generator finds on the key plane becomes a mask seed for
:func:`~.propagate.propagate` (SAM 3's video memory when the bundle has memory graphs, else the
carry-over), so an object keeps its id through z even where a per-plane segmentation would miss
it on a plane or split it in two. The cost is one memory step per object and plane instead of
one automatic segmentation per plane, and only objects present on the key plane are found
(docs/automatic.md, "Stacks").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..engine.automatic import AutoMaskSettings
from ..engine.store.embedding_store import EmbeddingStore
from ..engine.tiling.tiles import TileSettings
from ..engine.tracking.types import PropagationResult, Seed
from ..models.errors import PromptError
from .automatic import segment_all
from .bundles import Bundle
from .jobs import StackJob
from .propagate import propagate


@dataclass
class TrackedSegmentation:
    """Labels of objects found on a key plane and propagated through the stack.

    Attributes
    ----------
    labels : numpy.ndarray
        ``(n, rows, cols)`` int32, one id per object through z (0 = background).
    key : int
        The key plane (position along the slice axis).
    rows : list of dict
        The key plane's automatic table rows (score, stability, area there, box).
    propagation : PropagationResult or None
        How each object's passes ended (None when the key plane held no object).
    """

    labels: np.ndarray
    key: int
    rows: list[dict] = field(default_factory=list)
    propagation: PropagationResult | None = None


def segment_all_tracked(
    bundle: Bundle,
    data,
    *,
    key: int | None = None,
    settings: AutoMaskSettings | None = None,
    axis: int = 0,
    window: tuple[float, float] | None = None,
    store: EmbeddingStore | Path | str | None = None,
    image: str = "image",
    tile: TileSettings | int | None = None,
    stop_after_absent: int | None = 2,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> TrackedSegmentation:
    """Automatic objects of the ``key`` plane, each carried through a 3-D stack.

    Parameters
    ----------
    bundle : Bundle
        A bundle with ``clicks`` (``memory`` for SAM 3's video memory).
    data : array-like or path
        ``(n, rows, cols)`` gray stack after moving ``axis`` first.
    key : int, optional
        The plane segmented automatically (default the middle one, ``n // 2``).
    settings, axis, window, store, image, tile
        As in :func:`~.automatic.segment_all` (the store is shared by both steps, so the key
        plane is encoded once).
    stop_after_absent, progress, cancelled
        As in :func:`~.propagate.propagate`.

    Raises
    ------
    PromptError
        Not a 3-D stack, or ``key`` outside it.
    """
    view = StackJob(data, image, axis).view()
    if view.ndim != 3:
        raise PromptError(f"segment_all_tracked takes an (n, rows, cols) stack; got shape "
                          f"{tuple(view.shape)} (use segment_all for 2-D or 4-D data).")
    n = int(view.shape[0])
    key = n // 2 if key is None else int(key)
    if not 0 <= key < n:
        raise PromptError(f"key plane {key} is outside the stack's {n} planes (0 to {n - 1}).")
    st = None if store is None else bundle.open_store(store)
    auto = segment_all(bundle, view, settings=settings, window=window, slices=slice(key, key + 1),
                       store=st, image=image, link_iou=None, tile=tile, cancelled=cancelled)
    plane = np.asarray(auto.labels)[key]
    seeds = {int(i): Seed.from_mask(key, plane == i) for i in np.unique(plane) if i}
    if not seeds:
        return TrackedSegmentation(np.zeros(view.shape, np.int32), key, auto.rows)
    labels, result = propagate(bundle, view, seeds, window=window, store=st, image=image,
                               stop_after_absent=stop_after_absent, progress=progress,
                               cancelled=cancelled)
    return TrackedSegmentation(labels, key, auto.rows, result)
