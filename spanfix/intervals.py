"""The hull (first start, last end) of any run of consecutive extents in a list, in constant time.

stats' kernel fallback asks, for every step, for the hull of the device work its launches started:
a run of the launches sorted by time. Steps do not nest in real traces, so the runs are short and
scanning them costs as much as the launches in all; but steps nested in each other would each scan
nearly every launch, the square of the input. Long runs are answered from sparse tables (the minimum
and maximum over every run of a power-of-two length), built once, on the first long run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SCAN = 64  # runs up to this long are scanned: tables would cost more than they save

Extent = tuple[float, float]


class RangeHull:
    def __init__(self, extents: Sequence[Extent | None]):
        """extents: one per item, None for an item without one."""
        self._extents = extents
        self._starts: list[list[float]] | None = None
        self._ends: list[list[float]] | None = None

    def hull(self, lo: int, hi: int) -> Extent | None:
        """(smallest start, largest end) of extents[lo:hi], None when none of them has an extent."""
        if hi - lo <= SCAN:
            found = [extent for extent in self._extents[lo:hi] if extent is not None]
            if not found:
                return None
            return min(start for start, _ in found), max(end for _, end in found)
        if self._starts is None:
            self._build()
        level = (hi - lo).bit_length() - 1
        width = 1 << level
        starts, ends = self._starts[level], self._ends[level]
        start = min(starts[lo], starts[hi - width])
        end = max(ends[lo], ends[hi - width])
        return None if start == math.inf else (start, end)

    def _build(self) -> None:
        starts = [math.inf if extent is None else extent[0] for extent in self._extents]
        ends = [-math.inf if extent is None else extent[1] for extent in self._extents]
        self._starts, self._ends = [starts], [ends]
        width, count = 1, len(starts)
        while width * 2 <= count:
            starts = list(map(min, starts, starts[width:]))
            ends = list(map(max, ends, ends[width:]))
            self._starts.append(starts)
            self._ends.append(ends)
            width *= 2
