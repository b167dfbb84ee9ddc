"""Summaries of durations: exact, percentiles by nearest rank, and a duration for people."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

STATISTICS = ("count", "total", "mean", "p50", "p90", "p99", "max")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True, slots=True)
class Summary:
    count: int
    total_us: float
    mean_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    max_us: float

    def statistic(self, name: str) -> float:
        return self.count if name == "count" else getattr(self, f"{name}_us")


def nearest_rank(ordered: Sequence[float], q: int) -> float:
    """The q-th percentile of sorted values by nearest rank: the value at rank ceil(q/100 * n), 1-based."""
    rank = max(1, (q * len(ordered) + 99) // 100)  # integer ceiling: no float rounding at exact ranks
    return ordered[rank - 1]


def summarize(values: Iterable[float]) -> Summary:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values to summarize")
    total = math.fsum(ordered)
    p50, p90, p99 = (nearest_rank(ordered, q) for q in PERCENTILES)
    return Summary(len(ordered), total, total / len(ordered), p50, p90, p99, ordered[-1])


TIME_UNITS = {"us": (1.0, 1), "ms": (1e3, 3), "s": (1e6, 3)}  # microseconds per unit, decimals in tables


def time_unit(values_us: Iterable[float | None]) -> str:
    """One unit for a table or a chart: the largest its largest value reaches, so that the figures
    line up and stay short."""
    largest = max((abs(v) for v in values_us if v is not None), default=0.0)
    return next((unit for unit, (scale, _) in reversed(TIME_UNITS.items()) if largest >= scale), "us")


def format_us(us: float) -> str:
    """A duration for people: 850 us, 12.35 ms, 1.234 s."""
    if abs(us) < 1_000:
        return f"{us:.1f} us"
    if abs(us) < 1_000_000:
        return f"{us / 1_000:.2f} ms"
    return f"{us / 1_000_000:.3f} s"


def us(value: float) -> float:
    """Microseconds as written in JSON: rounded to the nanosecond, what Kineto's timestamps resolve."""
    return round(value, 3)
