"""What the two video-memory adapters (pagarcia tracker, jax-image-tools video) share.

The memory bank itself (which slices are remembered, their temporal rows, pointer offsets:
../shared/model-contracts.md section 10) is the engine's job; these adapters only run the graphs.
Everything here is layout-neutral: a :class:`MemoryFrame` holds the memory encoder's output in the
layout's own shape and is handed back, unchanged, to the same adapter's ``memory_attend``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..base import Embedding

#: Key of :attr:`Embedding.features` holding a memory-conditioned top-level feature
#: ``(1, C, g, g)`` float32. ``predict_masks`` feeds it to the decoder as it is; without it the
#: decoder gets the raw feature plus ``no_mem_embed`` (SAM 3's prompted-slice path).
CONDITIONED = "memory_conditioned"


@dataclass(frozen=True)
class MemoryFrame:
    """One slice's memory, as the memory encoder returned it.

    Attributes
    ----------
    features : numpy.ndarray
        float32 memory features in the layout's shape: ``(C_m, g, g)`` for the pagarcia layout,
        ``(T, C_m)`` tokens for the jax-video layout (SAM 3: ``C_m`` = 64, ``g`` = 72,
        ``T`` = 5184).
    pos_enc : numpy.ndarray
        float32 positional encoding of the same shape (constant across slices).
    """

    features: np.ndarray
    pos_enc: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held (what a bank entry costs)."""
        return int(self.features.nbytes + self.pos_enc.nbytes)


@dataclass(frozen=True)
class MemorySettings:
    """Memory-bank parameters a bundle publishes (None: the bundle does not say).

    Attributes
    ----------
    num_maskmem : int or None
        Temporal rows of ``maskmem_tpos_enc`` (SAM 3: 7; row ``num_maskmem - 1`` = prompted slice,
        row 0 = the previous slice).
    max_obj_ptrs : int or None
        Object pointers the model was trained with (SAM 3: 16).
    max_cond_frames_in_attn, keep_first_cond_frame, memory_temporal_stride_for_eval,
    use_memory_selection, mf_threshold
        SAM 3 tracker settings, where the bundle ships them.
    max_memories : int or None
        Spatial memories one ``memory_attend`` call accepts (a static graph dimension); None =
        any number.
    max_pointers : int or None
        Object pointers one call accepts; None = any number.
    """

    num_maskmem: int | None = None
    max_obj_ptrs: int | None = None
    max_cond_frames_in_attn: int | None = None
    keep_first_cond_frame: bool | None = None
    memory_temporal_stride_for_eval: int | None = None
    use_memory_selection: bool | None = None
    mf_threshold: float | None = None
    max_memories: int | None = None
    max_pointers: int | None = None


class MemoryOps:
    """The memory-graph operations of an adapter with :attr:`Capability.MEMORY`.

    A tracked slice is decoded in three steps: ``memory_attend`` (condition its raw feature on the
    bank), ``predict_masks`` on the returned embedding with no points (SAM's empty prompt), then
    ``memory_encode`` of the chosen mask to add the slice to the bank. A prompted slice skips the
    first step (its decoder input is the raw feature + ``no_mem_embed``).
    """

    #: What the bundle says about the memory bank (None where it says nothing).
    memory_settings: MemorySettings = MemorySettings()

    def memory_encode(
        self,
        embedding: Embedding,
        mask_logits: np.ndarray,
        object_score: float,
        is_mask_from_points: bool,
    ) -> MemoryFrame:
        """Run the memory encoder on one decoded slice.

        Parameters
        ----------
        embedding : Embedding
            The slice's embedding; its **raw** top-level feature is used (never
            ``+ no_mem_embed``, never the conditioned one).
        mask_logits : numpy.ndarray
            ``(h, w)`` float32 logits of the chosen mask over the whole model input, at any size
            (e.g. the 288 x 288 low-res candidate); resized bilinearly (``align_corners=False``)
            to the graph's mask input (1008 x 1008 in SAM 3).
        object_score : float
            The decoder's object-score logit (<= 0: the memory says "object absent").
        is_mask_from_points : bool
            True for prompted slices (the graph binarises the mask at logit 0), False for
            tracked ones (it uses ``sigmoid(logits)``).

        Returns
        -------
        MemoryFrame
            Layout-native features and positional encoding; keep it in the bank unchanged.
        """
        raise NotImplementedError

    def memory_attend(
        self,
        embedding: Embedding,
        memories: Sequence[MemoryFrame],
        memory_rows: Sequence[int],
        pointers: np.ndarray,
        pointer_offsets: Sequence[float],
    ) -> Embedding:
        """Condition a slice's raw feature on the memory bank.

        Parameters
        ----------
        embedding : Embedding
            The slice to track.
        memories : sequence of MemoryFrame
            Spatial memories from :meth:`memory_encode`, in upstream order (selected prompted
            slices first, then recent slices oldest to newest); at least one.
        memory_rows : sequence of int
            Temporal row of each memory in ``0 .. num_maskmem - 1``: ``num_maskmem - 1`` for a
            prompted slice, ``t_rel - 1`` for a slice ``t_rel`` steps back (0 = previous slice).
        pointers : numpy.ndarray
            ``(P, C)`` float32 object pointers (``MaskCandidates.extras["object_pointer"]``),
            prompted slices first; ``P`` may be 0.
        pointer_offsets : sequence of float
            ``(P,)`` slice distance of each pointer (>= 0, not normalised).

        Returns
        -------
        Embedding
            The embedding plus the conditioned feature (key :data:`CONDITIONED`); decode it with
            ``predict_masks`` and no points.

        Raises
        ------
        ValueError
            Inconsistent lengths, rows out of range, or more memories / pointers than the graph
            takes (:attr:`MemorySettings.max_memories`, :attr:`MemorySettings.max_pointers`).
        """
        raise NotImplementedError


#: Bank settings a bundle may ship, by the name the upstream tracker (and pagarcia) uses.
SETTINGS_KEYS = ("num_maskmem", "max_obj_ptrs", "max_cond_frames_in_attn",
                 "keep_first_cond_frame", "memory_temporal_stride_for_eval",
                 "use_memory_selection", "mf_threshold")


def settings_from(consts: Mapping[str, object], **graph_limits: int | None) -> MemorySettings:
    """:class:`MemorySettings` from a bundle's constants (scalars or one-element arrays)."""
    values: dict[str, object] = {}
    for key in SETTINGS_KEYS:
        if key in consts:
            v = np.asarray(consts[key]).reshape(-1)[0].item()
            values[key] = bool(v) if key in ("keep_first_cond_frame",
                                             "use_memory_selection") else v
    return MemorySettings(**values, **graph_limits)


def zero_fill(a: np.ndarray, rows: int | None) -> np.ndarray:
    """Pad axis 0 with zeros to ``rows`` (a static graph dimension); unchanged when None."""
    if rows is None or len(a) == rows:
        return np.ascontiguousarray(a)
    pad = np.zeros((rows - len(a), *a.shape[1:]), a.dtype)
    return np.ascontiguousarray(np.concatenate([a, pad]))


def conditioned(embedding: Embedding, feature: np.ndarray) -> Embedding:
    """A copy of ``embedding`` whose decoder input is the memory-conditioned ``feature``."""
    feats: Mapping[str, np.ndarray] = {**embedding.features, CONDITIONED: feature}
    return Embedding(feats, embedding.input_size, embedding.image_shape)


def check_memory_args(
    memories: Sequence[MemoryFrame],
    rows: Sequence[int],
    pointers: np.ndarray,
    offsets: Sequence[float],
    settings: MemorySettings,
    pointer_dim: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``memory_attend`` arguments; returns rows (int64), pointers, offsets (float32)."""
    rows_a = np.asarray(rows, np.int64).reshape(-1)
    ptrs = np.asarray(pointers, np.float32).reshape(-1, pointer_dim)
    offs = np.asarray(offsets, np.float32).reshape(-1)
    if not memories:
        raise ValueError("memory attention needs at least one memory (the prompted slice's)")
    if len(rows_a) != len(memories):
        raise ValueError(f"{len(memories)} memories but {len(rows_a)} temporal rows")
    if len(offs) != len(ptrs):
        raise ValueError(f"{len(ptrs)} object pointers but {len(offs)} offsets")
    n_rows = settings.num_maskmem
    if n_rows is not None and ((rows_a < 0) | (rows_a >= n_rows)).any():
        raise ValueError(f"temporal rows must lie in 0..{n_rows - 1}, got {rows_a.tolist()}")
    for what, n, cap in (("memories", len(memories), settings.max_memories),
                         ("object pointers", len(ptrs), settings.max_pointers)):
        if cap is not None and n > cap:
            raise ValueError(f"this bundle's memory attention takes at most {cap} {what}, got {n}")
    return rows_a, ptrs, offs
