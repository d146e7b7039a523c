"""Helpers for :meth:`SamAdapter.assumptions`: what an adapter assumed or learnt, and from where.

Each entry is ``name -> (value, source)``; ``source`` names the graph or file that said so, or
``"layout contract"`` when nothing in the bundle says it (a guess a user with a new export
should check).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..graph_info import TensorInfo
from ._common import SAM3_MEAN, SAM3_STD
from ._padding import PaddingDecision

Entry = tuple[str, str]
CONTRACT = "layout contract (nothing in the bundle says so)"


def padding(decisions: PaddingDecision | Mapping[str, PaddingDecision]) -> Entry:
    """One entry for one decoder or several (by file name)."""
    if isinstance(decisions, PaddingDecision):
        decisions = {"": decisions}
    values = {("graph pads itself" if d.graph_pads else "adapter appends (0, 0, -1)")
              for d in decisions.values()}
    sources = sorted({d.source for d in decisions.values()})
    if len(sources) > 2 and all(s.startswith("graph ") for s in sources):
        sources = [f"each of {len(sources)} decoder graphs"]
    return " / ".join(sorted(values)), "; ".join(sources)


def normalisation(info: TensorInfo, graph: str) -> Entry:
    """How the image reaches an encoder input (uint8: inside the graph; float: SAM 3's)."""
    if info.rank == 3 and info.dtype == "uint8":
        return "inside the encoder (uint8 input)", f"{graph} input {info.name} dtype"
    return f"x / 255, (x - {SAM3_MEAN}) / {SAM3_STD}", CONTRACT


def no_prompt_decoder() -> Entry:
    """For layouts without a point decoder."""
    return "no point decoder", "graphs"
