"""Every decode iteration over capture time: one bar per iteration split into its parts, one series per
rank (or file) and clock, each bar's hover listing the steps inside it. Past MAX_BARS iterations a bar
stands for a bucket of them: the mean of each part, with the slowest of the bucket marked."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence

from ..timing import CPU, GPU, TraceMeasures, summarize
from ..timing.iterations import DEVICE_PARTS, PARTS
from ..timing.measure import IterationTiming, StepTiming
from ..timing.numbers import TIME_UNITS
from ..timing.table import CLOCK_LONG, CLOCK_WORDS
from .formatting import _round, format_time, plotly_text
from .rank_comparison import _group_of, _shown

MAX_BARS = 1500  # decode iterations drawn one bar each per rank and clock; more are drawn in buckets
STEPS_IN_HOVER = 12


def _timeline(measures: Sequence[TraceMeasures], ranks: tuple[str | None, list[str]], drawn: dict | None = None
              ) -> dict:
    key, every = ranks
    labels = drawn["labels"] if drawn else every  # one chart each: past a few dozen, the slowest (drawn_ranks)
    by_series: dict[str, list[IterationTiming]] = defaultdict(list)
    for it in (it for m in measures for it in m.iterations):
        by_series[_group_of(key, it, labels[0])].append(it)
    steps_of = _steps_by_process(measures)
    shown = _shown(key, every)
    clocks = []
    for clock in (CPU, GPU):
        parts = PARTS if clock == CPU else DEVICE_PARTS
        totals = [it.cpu_us if clock == CPU else it.gpu_us for its in by_series.values() for it in its]
        totals = [t for t in totals if t is not None]
        if not totals:
            continue
        unit = "ms" if summarize(totals).p50_us >= 1e3 else "us"
        series = []
        for label in labels:
            found = sorted(by_series.get(label, []), key=lambda it: it.start_from_trace_us)
            if clock == GPU:
                found = [it for it in found if it.gpu_us is not None]
            if found:
                series.append(_series(shown[label], found, clock, parts, unit, steps_of))
        clocks.append({"clock": clock, "title": CLOCK_LONG[clock], "unit": unit, "parts": list(parts),
                       "series": series})
    left_out = {name: drawn[name] for name in ("left_out", "of", "by")} if drawn else None
    return {"clocks": clocks, "max_bars": MAX_BARS, "labelled": key is not None, "drawn": left_out}


def _steps_by_process(measures: Sequence[TraceMeasures]) -> dict[tuple, tuple[list[float], list[StepTiming]]]:
    grouped: dict[tuple, list[StepTiming]] = defaultdict(list)
    for step in (step for m in measures for step in m.steps):
        grouped[step.file, step.pid].append(step)
    out = {}
    for where, steps in grouped.items():
        steps.sort(key=lambda step: step.start_us)
        out[where] = ([step.start_us for step in steps], steps)
    return out


def _series(label: str, iterations: list[IterationTiming], clock: str, parts: Sequence[str], unit: str,
            steps_of: dict) -> dict:
    scale = TIME_UNITS[unit][0]
    n = len(iterations)
    bucket = max(1, math.ceil(n / MAX_BARS))
    x: list[float] = []
    values: dict[str, list[float]] = {part: [] for part in parts}
    hover: list[str] = []
    slowest_x: list[float] = []
    slowest_y: list[float] = []

    def part_of(it: IterationTiming, part: str) -> float:
        return (it.parts if clock == CPU else it.gpu_parts)[part]

    def total_of(it: IterationTiming) -> float:
        return it.cpu_us if clock == CPU else it.gpu_us

    for first in range(0, n, bucket):
        group = iterations[first:first + bucket]
        x.append(round(group[0].start_from_trace_us / 1e3, 3))
        for part in parts:
            values[part].append(_round(math.fsum(part_of(it, part) for it in group) / len(group) / scale))
        if bucket == 1:
            hover.append(_iteration_hover(group[0], first, n, clock, unit, steps_of))
        else:
            slow = max(group, key=total_of)
            slowest_x.append(x[-1])
            slowest_y.append(_round(total_of(slow) / scale))
            hover.append(f"iterations {first + 1}–{first + len(group)} of {n}: one bar, the mean of each part"
                         f"<br>slowest of them: {format_time(total_of(slow), unit)} {unit}"
                         f" at {slow.start_from_trace_us / 1e3:,.3f} ms")
    series = {"label": label, "count": n, "bucket": bucket, "x": x, "parts": values, "hover_markup": hover}
    if bucket > 1:
        series["slowest"] = {"x": slowest_x, "y": slowest_y}
    return series


def _iteration_hover(it: IterationTiming, index: int, n: int, clock: str, unit: str, steps_of: dict) -> str:
    total = it.cpu_us if clock == CPU else it.gpu_us
    lines = [(f"iteration {index + 1} of {n} at {it.start_from_trace_us / 1e3:,.3f} ms: "
              f"{format_time(total, unit)} {unit} on the {CLOCK_WORDS[clock]} clock")]
    starts, steps = steps_of.get((it.file, it.pid), ([], []))
    inside = steps[bisect.bisect_left(starts, it.start_us):bisect.bisect_left(starts, it.end_us)]
    shown = []
    for step in inside[:STEPS_IN_HOVER]:
        value = step.cpu_us if clock == CPU else step.gpu_us
        shown.append(f"{plotly_text(step.stage)} {format_time(value, unit)}" + ("" if value is None else f" {unit}"))
    if len(inside) > STEPS_IN_HOVER:
        shown.append(f"… {len(inside) - STEPS_IN_HOVER} more")
    lines.append("steps: " + (", ".join(shown) if shown else "none"))
    return "<br>".join(lines)
