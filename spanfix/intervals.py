"""The hull (first start, last end) of any run of consecutive extents in a list, in constant time.

stats' device view asks, for every step and every decode iteration, for the hull of the device work
its launches started: a run of the launches sorted by time. A step's run is short, but an iteration's
spans hundreds of launches, and steps nested in each other would each scan nearly every launch, the
square of the input. Long runs are answered from blocks of BLOCK extents: for each position the
smallest start and largest end from its block's first item up to it and from it to its block's
last, and sparse tables over whole blocks. Building them costs a few passes over the extents (a
sparse table over every item would cost one pass per doubling, eighteen for 240,000 launches).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate

SCAN = 64  # runs up to this long are scanned: tables would cost more than they save
BLOCK = 64

Extent = tuple[float, float]


class RangeHull:
    def __init__(self, starts: Sequence[float], ends: Sequence[float]):
        """One extent per item, as its start and end; an item without one has start inf and end -inf."""
        self._starts, self._ends = starts, ends
        self._built = False

    def hull(self, lo: int, hi: int) -> Extent | None:
        """(smallest start, largest end) of the extents of items lo to hi - 1, None when none has one."""
        if hi - lo <= SCAN:
            start = min(self._starts[lo:hi], default=math.inf)
            return None if start == math.inf else (start, max(self._ends[lo:hi]))
        if not self._built:
            self._build()
        last = hi - 1
        first_block, last_block = lo // BLOCK, last // BLOCK
        # lo to the end of its block, and the start of last's block to last: hi - lo > SCAN >= BLOCK
        # puts them in different blocks.
        start = min(self._start_to_end[lo], self._start_from_block[last])
        end = max(self._end_to_end[lo], self._end_from_block[last])
        if last_block - first_block > 1:  # whole blocks between them
            low, high = first_block + 1, last_block
            level = (high - low).bit_length() - 1
            width = 1 << level
            starts, ends = self._block_starts[level], self._block_ends[level]
            start = min(start, starts[low], starts[high - width])
            end = max(end, ends[low], ends[high - width])
        return None if start == math.inf else (start, end)

    def _build(self) -> None:
        starts, ends = self._starts, self._ends
        self._start_from_block, self._end_from_block = [], []  # from the block's first item to here
        self._start_to_end, self._end_to_end = [], []  # from here to the block's last item
        block_starts, block_ends = [], []
        for first in range(0, len(starts), BLOCK):
            block_start, block_end = starts[first:first + BLOCK], ends[first:first + BLOCK]
            self._start_from_block += accumulate(block_start, min)
            self._end_from_block += accumulate(block_end, max)
            backwards_start = list(accumulate(reversed(block_start), min))
            backwards_end = list(accumulate(reversed(block_end), max))
            self._start_to_end += reversed(backwards_start)
            self._end_to_end += reversed(backwards_end)
            block_starts.append(backwards_start[-1])
            block_ends.append(backwards_end[-1])
        self._block_starts, self._block_ends = [block_starts], [block_ends]
        width, count = 1, len(block_starts)
        while width * 2 <= count:
            block_starts = list(map(min, block_starts, block_starts[width:]))
            block_ends = list(map(max, block_ends, block_ends[width:]))
            self._block_starts.append(block_starts)
            self._block_ends.append(block_ends)
            width *= 2
        self._built = True
