"""How one object is carried to the next slice: SAM 3's video memory, or prompt carry-over.

:func:`~.propagation.propagate` runs the same pass loop for both; a tracker decides what a seed
slice leaves behind (a conditioning memory, or nothing), how a tracked slice is decoded, and what
happens to its bank when a pass meets a correction or moves on. Every decode goes through the one
decode step (:mod:`.decode`): memories and fed-back mask prompts get the decoder's own logits,
outputs the displayed (hole-filled) ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Protocol

import numpy as np

from napari_sam3_onnx.engine.postprocess import hole_area_for
from napari_sam3_onnx.engine.tracking.memory_bank import BankSettings, MemoryBank
from napari_sam3_onnx.engine.tracking.steps import (
    SliceOutput,
    decode_mask_seed,
    decode_prompt,
    mask_prompt,
    track_with_memory,
)
from napari_sam3_onnx.engine.tracking.types import Method, Seed
from napari_sam3_onnx.models.base import Capability, Embedding, SamAdapter


def memory_score(out: SliceOutput) -> float:
    """SAM 3's ``eff_iou_score`` of one object on one slice (memory selection)."""
    s = out.object_score
    return (2.0 / (1.0 + np.exp(-s)) - 1.0) * out.iou if s > 0 else 0.0


class Tracker(Protocol):
    """What the pass loop asks of a tracking method (one instance per run, all objects)."""

    method: Method
    banks: dict[int, MemoryBank]

    def decode_seed(self, oid: int, index: int, embedding: Embedding, seed: Seed) -> SliceOutput:
        """Decode an object's seed slice (a conditioning slice)."""
        ...

    def track(self, oid: int, index: int, sign: int, embedding: Embedding,
              prev: SliceOutput | None) -> SliceOutput | None:
        """Decode a tracked slice; ``prev`` is the object's last output with a mask in this pass.

        None: the object cannot be carried (the pass stops it as absent).
        """
        ...

    def meet_seed(self, oid: int, index: int, sign: int) -> None:
        """A pass that already tracks ``oid`` reached another of its seed slices (a correction)."""
        ...

    def moved_on(self, oid: int, pending: Iterable[tuple[int, int]]) -> None:
        """``oid`` was decoded on a slice; ``pending``: the ``(slice, sign)`` steps still to run."""
        ...


class MemoryTracker:
    """SAM 3's video memory: one bank per object, keyed by slice, shared by both passes.

    Parameters
    ----------
    adapter : SamAdapter
        A bundle with :attr:`Capability.MEMORY`.
    objects : iterable of int
        The object ids.
    num_slices : int
        Slices along the axis (the bank's index space).
    fill_hole_area : int
        Hole filling on tracked slices' outputs (SAM 3's tracker: 0).
    """

    method: Method = "memory"

    def __init__(self, adapter: SamAdapter, objects: Iterable[int], num_slices: int,
                 fill_hole_area: int = 0) -> None:
        self.adapter = adapter
        self.settings = BankSettings.from_adapter(adapter)
        self.banks = {int(o): MemoryBank(self.settings, num_slices) for o in objects}
        self.click_holes = hole_area_for(adapter.mask_size)
        self.fill_hole_area = fill_hole_area

    def decode_seed(self, oid: int, index: int, embedding: Embedding, seed: Seed) -> SliceOutput:
        """Decode the seed (clicks path, or the mask itself) and store a conditioning memory."""
        if seed.prompt is not None:
            out, mem = decode_prompt(self.adapter, embedding, seed.prompt, self.click_holes, True)
        else:
            out, mem = decode_mask_seed(self.adapter, embedding, _seed_mask(seed), True)
        frame = self.adapter.memory_graphs.memory_encode(embedding, mem, out.object_score, True)
        self.banks[oid].add(index, frame, out.pointer, conditioning=True,
                            score=memory_score(out))
        return out

    def track(self, oid: int, index: int, sign: int, embedding: Embedding,
              prev: SliceOutput | None) -> SliceOutput | None:
        """Attend to the bank's selection, decode with no points and store the new memory."""
        bank = self.banks[oid]
        out, mem = track_with_memory(self.adapter, embedding, bank.select(index, sign),
                                     self.settings.max_obj_ptrs, self.fill_hole_area)
        frame = self.adapter.memory_graphs.memory_encode(embedding, mem, out.object_score,
                                                         False)
        bank.add(index, frame, out.pointer, conditioning=False, score=memory_score(out))
        return out

    def meet_seed(self, oid: int, index: int, sign: int) -> None:
        """Hide the old tracked memories around a correction for the rest of this pass."""
        self.banks[oid].correct_at(index, sign)

    def moved_on(self, oid: int, pending: Iterable[tuple[int, int]]) -> None:
        """Drop memories no pending step can select any more."""
        self.banks[oid].evict(pending)


class CarryOver:
    """Prompt carry-over for bundles without memory graphs.

    Each slice is prompted with the previous output's mask as a box and an interior click, and,
    where the decoder takes one, the decoder's own logits of that output as a mask prompt.
    """

    method: Method = "carry-over"

    def __init__(self, adapter: SamAdapter) -> None:
        self.adapter = adapter
        self.banks: dict[int, MemoryBank] = {}
        self.click_holes = hole_area_for(adapter.mask_size)

    def decode_seed(self, oid: int, index: int, embedding: Embedding, seed: Seed) -> SliceOutput:
        """Decode the seed (clicks path, or the mask itself)."""
        if seed.prompt is not None:
            return decode_prompt(self.adapter, embedding, seed.prompt, self.click_holes, False)[0]
        return decode_mask_seed(self.adapter, embedding, _seed_mask(seed), False)[0]

    def track(self, oid: int, index: int, sign: int, embedding: Embedding,
              prev: SliceOutput | None) -> SliceOutput | None:
        """Prompt the slice from ``prev`` (None when there is nothing to carry)."""
        if prev is None:
            return None
        logits = prev.fed_back if self.adapter.prompt_decoder.accepts_mask_input else None
        out, _ = decode_prompt(self.adapter, embedding, mask_prompt(prev.mask, logits),
                               self.click_holes, False)
        return replace(out, conditioning=False, pointer=None)

    def meet_seed(self, oid: int, index: int, sign: int) -> None:
        """Nothing to hide: each slice only looks at the one before."""

    def moved_on(self, oid: int, pending: Iterable[tuple[int, int]]) -> None:
        """Nothing is kept."""


def tracker_for(adapter: SamAdapter, objects: Iterable[int], num_slices: int,
                fill_hole_area: int = 0) -> Tracker:
    """Memory tracking where the bundle has memory graphs, else prompt carry-over."""
    if adapter.has(Capability.MEMORY):
        return MemoryTracker(adapter, objects, num_slices, fill_hole_area)
    return CarryOver(adapter)


def _seed_mask(seed: Seed) -> np.ndarray:
    """The mask of a seed given as one (a :class:`Seed` has a prompt or a mask, never neither)."""
    if seed.mask is None:
        raise ValueError("this seed has a prompt, not a mask")
    return seed.mask
