"""Inputs and outputs of :func:`napari_sam3_onnx.engine.tracking.propagation.propagate`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from napari_sam3_onnx.engine.interactive import Prompt
from napari_sam3_onnx.engine.tracking.memory_bank import MemoryBank
from napari_sam3_onnx.engine.tracking.steps import SliceOutput

Direction = Literal["both", "forward", "backward"]
Method = Literal["memory", "carry-over"]
StopReason = Literal["absent", "empty-mask", "range-end", "cancelled"]


@dataclass(frozen=True)
class Seed:
    """Where an object is given: a prompt or a mask on one slice (a conditioning slice).

    Attributes
    ----------
    index : int
        Slice index along the propagation axis.
    prompt : Prompt or None
        Clicks and/or a box in slice ``(row, col)`` coordinates.
    mask : numpy.ndarray or None
        ``(rows, cols)`` bool mask of the object on that slice (instead of a prompt).

    Examples
    --------
    >>> seeds = {1: api.Seed.clicks(4, [[40, 61]]),             # object 1: a click on z = 4
    ...          2: api.Seed.from_mask(9, mask)}                # object 2: a (rows, cols) mask
    >>> labels, run = api.propagate(bundle, stack, seeds)
    """

    index: int
    prompt: Prompt | None = None
    mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.mask is None):
            raise ValueError("a Seed needs exactly one of prompt or mask")

    @classmethod
    def clicks(cls, index: int, points_rc, labels=None, box_rc=None) -> Seed:
        """A click/box seed (``labels`` default to positive)."""
        return cls(int(index), prompt=Prompt.clicks(points_rc, labels, box_rc))

    @classmethod
    def from_mask(cls, index: int, mask: np.ndarray) -> Seed:
        """A mask seed."""
        return cls(int(index), mask=np.asarray(mask, bool))


@dataclass(frozen=True)
class Stop:
    """Why and where one object's pass ended.

    Attributes
    ----------
    index : int
        The last slice the pass decoded for this object.
    reason : {"absent", "empty-mask", "range-end", "cancelled"}
        ``absent``: the object score was <= 0 on ``stop_after_absent`` consecutive slices;
        ``empty-mask``: as ``absent`` but the last of them had a positive score and an empty
        mask; ``range-end``: the pass reached the end of the range; ``cancelled``: the user
        cancelled.
    last_present : int or None
        The last slice of the pass where the object had a mask.
    """

    index: int
    reason: StopReason
    last_present: int | None


@dataclass
class ObjectTrack:
    """One object's propagation.

    Attributes
    ----------
    outputs : dict[int, SliceOutput]
        Per slice index: mask ``(rows, cols)`` bool, low-res logits, score (empty when the
        caller asked not to keep outputs).
    conditioning : tuple of int
        The object's seed slices.
    stops : dict[str, Stop]
        ``"forward"`` / ``"backward"``: how each pass ended for this object.
    """

    outputs: dict[int, SliceOutput] = field(default_factory=dict)
    conditioning: tuple[int, ...] = ()
    stops: dict[str, Stop] = field(default_factory=dict)

    def mask(self, index: int) -> np.ndarray | None:
        """``(rows, cols)`` bool mask on slice ``index`` (None: not visited)."""
        out = self.outputs.get(index)
        return None if out is None else out.mask

    @property
    def slices(self) -> list[int]:
        """Slices with an output, ascending."""
        return sorted(self.outputs)


@dataclass
class PropagationResult:
    """What :func:`~napari_sam3_onnx.engine.tracking.propagation.propagate` returns.

    Attributes
    ----------
    method : {"memory", "carry-over"}
        ``memory``: SAM's video memory; ``carry-over``: the bundle has no memory graphs, so each
        slice was prompted from the previous slice's mask (box + interior click + mask prompt).
    objects : dict[int, ObjectTrack]
        Per object id.
    visited : list[tuple[int, int]]
        ``(slice, sign)`` of every tracked slice in processing order (+1 forward, -1 backward).
    cancelled : bool
        The run was cancelled; every recorded slice is complete for the objects tracked on it.
    encoder_calls : int
        Slices this run encoded (cached embeddings are not counted).
    banks : dict[int, MemoryBank]
        The memory bank of each object (``memory`` method only), for its counters.
    """

    method: Method
    objects: dict[int, ObjectTrack]
    visited: list[tuple[int, int]] = field(default_factory=list)
    cancelled: bool = False
    encoder_calls: int = 0
    banks: dict[int, MemoryBank] = field(default_factory=dict)

    def masks(self, index: int) -> dict[int, np.ndarray]:
        """``{object id: (rows, cols) bool}`` on slice ``index`` (objects with an output)."""
        return {oid: t.outputs[index].mask for oid, t in self.objects.items()
                if index in t.outputs}
