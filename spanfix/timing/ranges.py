"""Runs of consecutive device items, answered as arrays: their extent, summed duration, busy time.

stats asks, for every step and every part of every decode iteration, about the device items its
launches queued: a run of consecutive item numbers (device.py). A step's run is short, an
iteration's holds hundreds of items, and steps nested in each other would each hold nearly every
item of the trace, the square of the input if each run were scanned. So: durations and overlaps
between neighbours are prefix sums (a run's total, or whether it overlaps at all, in constant
time), and the extent of a long run comes from tables over blocks of BLOCK items (for each item the
smallest start and largest end from its block's first item up to it and from it to its block's
last, and sparse tables over whole blocks), built once, on the first long run asked about. Many
runs at once (every step of a trace) are answered by numpy in a few calls. Times are integer
nanoseconds, so every answer is exact.
"""

from __future__ import annotations

from typing import Any

SCAN = 64  # runs up to this long are scanned: tables would cost more than they save
BLOCK = 64
_BIG = 2**62  # beyond every time (nanoseconds within 2**63 - 1): the start of "no item"


class Ranges:
    def __init__(self, np, starts, ends):
        self._np = np
        self.starts, self.ends = starts, ends  # numpy int64, per item
        self._durations = self._overlaps = None
        self._tables: tuple | None = None

    @classmethod
    def empty(cls) -> Ranges:
        import numpy as np
        return cls(np, np.zeros(0, np.int64), np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.starts)

    # -- one run at a time

    def extent(self, a: int, b: int) -> tuple[int, int] | None:
        """(first start, last end) of items a to b - 1; None for no item."""
        if b <= a:
            return None
        if b - a <= SCAN:
            return int(self.starts[a:b].min()), int(self.ends[a:b].max())
        low, high = self.extents(self._np.array([a]), self._np.array([b]))
        return int(low[0]), int(high[0])

    def duration(self, a: int, b: int) -> int:
        """The durations of items a to b - 1 added up."""
        if b <= a:
            return 0
        sums = self._sums()
        return int(sums[b] - sums[a])

    def sequential(self, a: int, b: int) -> bool:
        """Does each of items a to b - 1 start once the one before it has ended? Then they never run
        at once (each starts no earlier than every earlier one ended), and their busy time is their sum."""
        if b - a < 2:
            return True
        overlaps = self._neighbours()
        return int(overlaps[b - 1]) == int(overlaps[a])

    def union(self, a: int, b: int) -> int:
        """How long at least one of items a to b - 1 runs."""
        np = self._np
        if b <= a:
            return 0
        order = np.argsort(self.starts[a:b], kind="stable")
        starts, ends = self.starts[a:b][order], self.ends[a:b][order]
        reach = np.maximum.accumulate(ends)
        before = np.concatenate(([starts[0]], reach[:-1]))
        return int(np.maximum(ends - np.maximum(starts, before), 0).sum())

    # -- many runs at once

    def extents(self, lo, hi) -> tuple[Any, Any]:
        """extent() of many nonempty runs (numpy arrays of their first and end items)."""
        np = self._np
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        if len(lo):
            # Runs that do not overlap (a track's steps, the iterations' windows): reduced in place.
            order = np.argsort(lo, kind="stable")
            a, b = lo[order], hi[order]
            if bool(np.all(b[:-1] <= a[1:])):
                return self._disjoint_extents(a, b, order)
        low = np.empty(len(lo), np.int64)
        high = np.empty(len(lo), np.int64)
        short = (hi - lo) <= SCAN
        if short.any():
            a, b = lo[short], hi[short]
            offsets = np.arange(SCAN)
            positions = a[:, None] + offsets[None, :]
            inside = positions < b[:, None]
            positions = np.minimum(positions, len(self.starts) - 1)
            low[short] = np.where(inside, self.starts[positions], _BIG).min(axis=1)
            high[short] = np.where(inside, self.ends[positions], -_BIG).max(axis=1)
        long = ~short
        if long.any():
            low[long], high[long] = self._long_extents(lo[long], hi[long])
        return low, high

    def _disjoint_extents(self, a, b, order) -> tuple[Any, Any]:
        """Extents of nonempty runs a[i]..b[i] in order and apart: each the reduction of its stretch
        of the items (numpy's reduceat over the runs' bounds), no table needed."""
        np = self._np
        bounds = np.empty(2 * len(a), np.int64)
        bounds[0::2], bounds[1::2] = a, b
        if bounds[-1] >= len(self.starts):  # the last run ends with the items: reduceat goes to the end
            bounds = bounds[:-1]
        low = np.minimum.reduceat(self.starts, bounds)[0::2]
        high = np.maximum.reduceat(self.ends, bounds)[0::2]
        found_low, found_high = np.empty(len(a), np.int64), np.empty(len(a), np.int64)
        found_low[order], found_high[order] = low, high
        return found_low, found_high

    def durations(self, lo, hi) -> Any:
        sums = self._sums()
        return sums[hi] - sums[lo]

    def sequentials(self, lo, hi) -> Any:
        np = self._np
        overlaps = self._neighbours()
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        single = (hi - lo) < 2
        last = np.maximum(hi - 1, 0)
        return single | (overlaps[last] == overlaps[np.minimum(lo, len(overlaps) - 1)])

    # -- tables

    def _sums(self) -> Any:
        """sums[k]: the durations of the first k items added up (exact: Python integers should a
        trace's durations add up past 64 bits)."""
        if self._durations is None:
            np = self._np
            lengths = self.ends - self.starts
            if lengths.size and float(lengths.astype(np.float64).sum()) >= 2.0**62:
                lengths = lengths.astype(object)
            self._durations = np.concatenate((np.zeros(1, lengths.dtype), np.cumsum(lengths)))
        return self._durations

    def _neighbours(self) -> Any:
        """overlaps[k]: how many of items 1..k start before the item before them ends."""
        if self._overlaps is None:
            np = self._np
            overlapping = np.zeros(len(self.starts), np.int64)
            if len(self.starts) > 1:
                overlapping[1:] = self.starts[1:] < self.ends[:-1]
            self._overlaps = np.cumsum(overlapping)
        return self._overlaps

    def _long_extents(self, lo, hi) -> tuple[Any, Any]:
        np = self._np
        start_up, start_down, end_up, end_down, block_starts, block_ends = self._blocks()
        last = hi - 1
        first_block, last_block = lo // BLOCK, last // BLOCK
        # lo to the end of its block, and the start of last's block to last: hi - lo > SCAN >= BLOCK
        # puts them in different blocks.
        low = np.minimum(start_down[lo], start_up[last])
        high = np.maximum(end_down[lo], end_up[last])
        between = last_block - first_block > 1  # whole blocks between them
        if between.any():
            a, b = first_block[between] + 1, last_block[between]
            level = np.floor(np.log2(b - a)).astype(np.int64)
            width = np.left_shift(1, level)
            for k in np.unique(level).tolist():
                chosen = level == k
                starts, ends = block_starts[k], block_ends[k]
                aa, bb = a[chosen], b[chosen] - width[chosen]
                where = np.flatnonzero(between)[chosen]
                low[where] = np.minimum(low[where], np.minimum(starts[aa], starts[bb]))
                high[where] = np.maximum(high[where], np.maximum(ends[aa], ends[bb]))
        return low, high

    def _blocks(self) -> tuple:
        if self._tables is None:
            np = self._np
            count = len(self.starts)
            padded = -(-count // BLOCK) * BLOCK
            starts = np.full(padded, _BIG, np.int64)
            ends = np.full(padded, -_BIG, np.int64)
            starts[:count], ends[:count] = self.starts, self.ends
            starts, ends = starts.reshape(-1, BLOCK), ends.reshape(-1, BLOCK)
            start_up = np.minimum.accumulate(starts, axis=1).ravel()  # from the block's first item to here
            end_up = np.maximum.accumulate(ends, axis=1).ravel()
            start_down = np.minimum.accumulate(starts[:, ::-1], axis=1)[:, ::-1].ravel()  # from here to its last
            end_down = np.maximum.accumulate(ends[:, ::-1], axis=1)[:, ::-1].ravel()
            block_starts, block_ends = [starts.min(axis=1)], [ends.max(axis=1)]
            width = 1
            while width * 2 <= len(block_starts[0]):
                block_starts.append(np.minimum(block_starts[-1][:-width], block_starts[-1][width:]))
                block_ends.append(np.maximum(block_ends[-1][:-width], block_ends[-1][width:]))
                width *= 2
            self._tables = (start_up, start_down, end_up, end_down, block_starts, block_ends)
        return self._tables
