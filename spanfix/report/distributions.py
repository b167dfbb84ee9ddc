"""Each stage's step durations for drawing, per clock: histograms over bins every stage on the clock
shares, CDFs thinned to a few hundred points, and the baseline's (its own series for a trace, its
percentiles as points for a saved stats result)."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ..timing import CPU, GPU, TraceMeasures, summarize
from ..timing.numbers import TIME_UNITS
from ..timing.table import CLOCK_LONG
from .colors import stage_sort_key
from .formatting import _round

CDF_POINTS = 400  # points of a CDF before its tail; the tail keeps up to CDF_TAIL more
CDF_TAIL = 100
BINS_PER_DECADE = 20  # log histograms
LINEAR_BINS = 50
LOG_SPAN = 30.0  # a clock's durations span more than this factor: log axis


def step_durations(measures: Iterable[TraceMeasures], clock: str) -> dict[str, list[float]]:
    """Every step's duration on a clock, by stage (a GPU duration only where one was measured)."""
    found: dict[str, list[float]] = defaultdict(list)
    for step in (step for m in measures for step in m.steps):
        value = step.cpu_us if clock == CPU else step.gpu_us
        if value is not None and math.isfinite(value):  # a duration that is no number cannot be drawn
            found[step.stage].append(value)
    return found


def _bins(values: Iterable[float]) -> tuple[list[float], bool]:
    """Edges shared by every stage on a clock: logarithmic when the durations span orders of magnitude."""
    positive = [v for v in values if v > 0]
    if not positive:
        return [0.0, 1.0], False
    lo, hi = min(positive), max(positive)
    if hi <= lo:
        return [lo * 0.95, hi * 1.05], False
    decades = math.log10(hi) - math.log10(lo)  # hi / lo itself can overflow (a denormal lo)
    if decades >= math.log10(LOG_SPAN):
        count = max(1, math.ceil(decades * BINS_PER_DECADE))
        edges = [10 ** (math.log10(lo) + decades * i / count) for i in range(count + 1)]
        edges[-1] = hi
        return edges, True
    return [lo + (hi - lo) * i / LINEAR_BINS for i in range(LINEAR_BINS + 1)], False


def histogram(values: Sequence[float], edges: Sequence[float], log: bool, scale: float) -> dict:
    """Counts per bin, drawn as a step line (one point per bin from the first filled to the last, and a zero on
    either side). Values at or below the first edge count in the first bin, the largest in the last."""
    counts = [0] * (len(edges) - 1)
    for value in values:
        counts[min(len(counts) - 1, max(0, bisect.bisect_right(edges, value) - 1))] += 1
    filled = [i for i, count in enumerate(counts) if count]
    total = len(values)
    x, y, custom = [], [], []
    if not filled:
        return {"x": x, "y": y, "customdata": custom, "count": 0}
    first, last = filled[0], filled[-1]
    for i in range(max(0, first - 1), min(len(counts), last + 2)):
        lo, hi = edges[i], edges[i + 1]
        center = math.sqrt(lo * hi) if log and lo > 0 else (lo + hi) / 2
        x.append(_round(center / scale))
        y.append(_round(counts[i] / total * 100))
        custom.append([counts[i], _round(lo / scale), _round(hi / scale)])
    return {"x": x, "y": y, "customdata": custom, "count": total}


def cdf(values: Sequence[float], scale: float) -> dict:
    """The empirical CDF, thinned for drawing: every span when few, else evenly spaced ranks plus a denser
    tail (the top ranks, where regressions hide), always with the smallest and the largest."""
    ordered = sorted(values)
    n = len(ordered)
    if n <= CDF_POINTS + CDF_TAIL:
        ranks = range(n)
    else:
        chosen = {round(i * (n - 1) / (CDF_POINTS - 1)) for i in range(CDF_POINTS)}
        tail = max(1, n // 10)  # the top 10%, on a log scale of distance from the top
        chosen.update(n - round(tail ** (i / (CDF_TAIL - 1))) for i in range(CDF_TAIL))
        ranks = sorted(r for r in chosen if 0 <= r < n)
    x = [_round(ordered[r] / scale) for r in ranks]
    y = [_round((r + 1) / n, 6) for r in ranks]
    return {"x": [x[0], *x], "y": [0.0, *y], "count": n}  # from 0 at the smallest duration


def _distributions(measures: Sequence[TraceMeasures], document: dict, baseline_measures: TraceMeasures | None,
                   baseline_document: dict | None) -> dict:
    clocks = []
    for clock in (CPU, GPU):
        found = step_durations(measures, clock)
        if not found:
            continue
        base = step_durations([baseline_measures], clock) if baseline_measures is not None else {}
        every = [v for values in (*found.values(), *base.values()) for v in values]
        unit = "ms" if summarize(every).p50_us >= 1e3 else "us"
        scale = TIME_UNITS[unit][0]
        edges, log = _bins(every)
        stages = []
        for stage in sorted(found, key=stage_sort_key):
            entry = {"stage": stage, "histogram": histogram(found[stage], edges, log, scale),
                     "cdf": cdf(found[stage], scale)}
            if stage in base:
                entry["baseline"] = {"histogram": histogram(base[stage], edges, log, scale),
                                     "cdf": cdf(base[stage], scale)}
            elif baseline_document is not None:
                entry["baseline_percentiles"] = _saved_percentiles(baseline_document, stage, clock, scale)
            stages.append(entry)
        clocks.append({"clock": clock, "title": CLOCK_LONG[clock], "unit": unit, "log": log, "stages": stages,
                       **_axis(edges[0] / scale, edges[-1] / scale, log)})
    source = document["baseline"]
    kind = None if source is None else "trace" if baseline_measures is not None else "saved"
    return {"clocks": clocks, "baseline": source, "baseline_kind": kind}


def _axis(lo: float, hi: float, log: bool) -> dict:
    """The duration axis: a little room on either side (Plotly fits lines edge to edge), and on a log axis
    ticks at 1, 2 and 5 times a power of ten, labelled in full (Plotly's own would read 2, 3, 4, ...)."""
    if not log:
        pad = (hi - lo) * 0.03 or abs(hi) * 0.05 or 1.0
        return {"range": [_round(lo - pad), _round(hi + pad)]}
    low, high = math.log10(lo), math.log10(hi)
    pad = (high - low) * 0.03
    ticks = [m * 10.0 ** k for k in range(math.floor(low), math.ceil(high) + 1) for m in (1, 2, 5)]
    ticks = [_round(t) for t in ticks if lo / 1.01 <= t <= hi * 1.01]
    return {"range": [round(low - pad, 4), round(high + pad, 4)], "ticks": ticks}


def _saved_percentiles(document: dict, stage: str, clock: str, scale: float) -> dict | None:
    """A saved stats result keeps a stage's p50, p90, p99 and max: drawn as points on the CDF."""
    for row in document.get("stages") or []:
        if isinstance(row, dict) and row.get("stage") == stage and row.get("clock", CPU) == clock:
            try:
                points = [(float(row[f"{name}_us"]), q) for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99),
                                                                         ("max", 1.0))]
            except (KeyError, TypeError, ValueError):
                return None
            return {"x": [_round(v / scale) for v, _ in points], "y": [q for _, q in points]}
    return None
