"""Geometry of a test graph set: a small one for fast tests and the real SAM 3 one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TestGeometry:
    """Sizes of a test bundle, derived like SAM 3's (input = 14 x grid, masks = 4 x grid).

    Attributes
    ----------
    grid : int
        Top-level feature grid (72 in SAM 3).
    channels : tuple[int, int, int]
        Channels of the 4x, 2x and 1x feature levels (SAM 3 tracker: 32, 64, 256; detector
        neck: 256 each). Test graphs keep them small; only channel 0 carries data.
    """

    __test__ = False  # not a pytest class

    grid: int = 6
    channels: tuple[int, int, int] = (2, 3, 4)

    @property
    def input_size(self) -> int:
        """Square encoder input (1008 in SAM 3)."""
        return 14 * self.grid

    @property
    def mask_size(self) -> int:
        """Low-resolution mask size (288 in SAM 3)."""
        return 4 * self.grid

    @property
    def levels(self) -> tuple[int, int, int]:
        """Sizes of the three feature levels (288, 144, 72 in SAM 3)."""
        return 4 * self.grid, 2 * self.grid, self.grid


#: Small geometry for most tests: 84-px input, 24-px masks.
SMALL = TestGeometry()
#: SAM 3's real geometry (1008 input, 288 masks) with few channels, to prove nothing is hard-coded.
FULL = TestGeometry(grid=72, channels=(2, 2, 2))
