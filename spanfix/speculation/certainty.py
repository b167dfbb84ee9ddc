"""How sure a speed figure is, and which decode iterations its means stand on.

Steady state: a decode iteration that took over STEADY_FACTOR times the median of its side's decode
iterations at its batch size, on the same clock (a warm-up, a recompilation, the machine busy
elsewhere), is left out of the speed figures' means; how many, and how long they took, is said.

The interval: a circular block bootstrap. Each side's decode iterations at a batch size (the
speculative run's, the plain twin's; and, where the accept length comes from the trace, the
iterations' own accept lengths) are resampled apart, in blocks of consecutive iterations (about the
cube root of their number long), so that iterations that run slow together stay together; each of
RESAMPLES resamples gives a mean per side, and the figure made from those means (speedup, break-even,
and the overall row's weighted figures from each batch size's) spreads as the figure would over
captures of the same run. The 2.5th and 97.5th percentiles of that spread are the 95% interval.
Assumptions: the iterations of a capture are a stationary series whose correlation dies out within
a block; the two captures (and the accept lengths) vary independently of each other; a stated or
side-file accept length is exact. Fewer than MIN_ITERATIONS on a side tell nothing of its spread:
no interval then. The seed is fixed, so the same inputs give the same interval, byte for byte.
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Sequence

STEADY_FACTOR = 5.0  # an iteration over this many times the median of its batch size is left out
CONFIDENCE = 0.95
RESAMPLES = 2000
MIN_ITERATIONS = 3  # on each side: fewer say nothing of how much the iterations vary
DRAWN = 1 << 21  # block starts drawn at a time (16 MiB of them), whatever the number of iterations
LOW, HIGH = (1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2


def steady_limit(values: Sequence[float]) -> float:
    """The longest value the steady state keeps: STEADY_FACTOR times the median (every value, for
    fewer than MIN_ITERATIONS)."""
    return math.inf if len(values) < MIN_ITERATIONS else STEADY_FACTOR * statistics.median(values)


def steady(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The values kept (in order) and those left out: over STEADY_FACTOR times the median of all."""
    if len(values) < MIN_ITERATIONS:
        return list(values), []
    limit = steady_limit(values)
    kept = [value for value in values if value <= limit]
    return kept, [value for value in values if value > limit]


def block_length(count: int) -> int:
    return max(1, round(count ** (1 / 3)))


def seed_of(*parts: object) -> int:
    """A fixed seed per figure: the same figure of the same inputs draws the same resamples."""
    return zlib.crc32(repr(parts).encode())


def resampled_means(values: Sequence[float], seed: int):
    """RESAMPLES means of circular block resamples of values (numpy), None for fewer than MIN_ITERATIONS.
    Each resample is ceil(n / L) blocks of L consecutive values, a block starting anywhere and wrapping
    around the end, so that every value is as likely to be drawn."""
    import numpy as np

    count = len(values)
    if count < MIN_ITERATIONS:
        return None
    length = block_length(count)
    blocks = -(-count // length)
    x = np.asarray(values, dtype=np.float64)
    wrapped = np.concatenate([x, x[:length - 1]])
    sums = np.concatenate([[0.0], np.cumsum(wrapped)])
    block_sums = sums[length:length + count] - sums[:count]  # the block that starts at each value
    rng = np.random.default_rng(seed)
    rows = max(1, DRAWN // blocks)  # resamples drawn at once: memory stays bounded however many iterations
    means = np.empty(RESAMPLES)
    for first in range(0, RESAMPLES, rows):
        last = min(RESAMPLES, first + rows)
        starts = rng.integers(0, count, size=(last - first, blocks))
        means[first:last] = block_sums[starts].sum(axis=1) / (blocks * length)
    return means


def bounds(draws) -> tuple[float, float] | None:
    """The interval's ends from a figure's resampled values (None where it has none)."""
    import numpy as np

    if draws is None:
        return None
    finite = draws[np.isfinite(draws)]
    if len(finite) < len(draws):  # a resample without a figure (a zero mean): no interval to trust
        return None
    low, high = np.quantile(finite, [LOW, HIGH]).tolist()
    return float(low), float(high)


def pays(interval: tuple[float, float] | None) -> bool | None:
    """True only when the interval lies above 1, False only when below; None when it holds 1 (or is unknown)."""
    if interval is None:
        return None
    return True if interval[0] > 1 else False if interval[1] < 1 else None


def variation(groups: Sequence[Sequence[float]]) -> float | None:
    """The coefficient of variation of decode iterations, each over the mean of its own group (its
    batch size), so that several batch sizes do not count as spread; None with fewer than two."""
    import numpy as np

    relative = [value / mean for values in groups if values and (mean := math.fsum(values) / len(values)) > 0
                for value in values]
    return float(np.std(relative, ddof=1)) if len(relative) > 1 else None


def spread(draws) -> float:
    """The variance of the logarithm of resampled means: what a side adds to a ratio's uncertainty."""
    import numpy as np

    if draws is None or not np.all(draws > 0):
        return 0.0
    return float(np.var(np.log(draws)))


def growth_to_tell(figure: float, interval: tuple[float, float]) -> float | None:
    """How many times the iterations behind an interval would make one narrow enough to leave 1 out
    (its width shrinks as one over the root of their number), for the same figure. None where the
    figure is too close to 1 for any capture to tell."""
    low, high = interval
    if figure <= 0 or low <= 0 or high <= 0:
        return None
    distance = abs(math.log(figure))
    if distance < 0.005:
        return None
    half = (math.log(high) - math.log(low)) / 2
    return (half / distance) ** 2


def iterations_to_tell(count: int, growth: float) -> int:
    """About how many iterations, of a side that has count, would tell (growth_to_tell): more than now."""
    return max(math.ceil(count * growth), count + 1)


def rounded_count(count: int) -> int:
    """A count said roughly: two significant figures."""
    if count < 100:
        return count
    scale = 10 ** (len(str(count)) - 2)
    return -(-count // scale) * scale
