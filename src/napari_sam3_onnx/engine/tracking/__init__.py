"""Propagation through z or t: trackers, SAM 3's memory bank, per-slice decode steps."""
