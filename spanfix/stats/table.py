"""Several traces' measures into one table: rows per stage (and grouping key) and clock, and the
decode iteration breakdown per file or rank."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .iterations import PARTS
from .measure import IterationTiming, TraceMeasures
from .numbers import STATISTICS, Summary, summarize, us

CPU, GPU = "cpu", "gpu"
CLOCKS = (CPU, GPU)
GROUP_KEYS = ("file", "rank", "stage", "name", "bs")  # every grouping key, in column order
SCOPE_KEYS = ("file", "rank")  # keys that split the whole (shares, iterations); the others split stages


@dataclass(frozen=True, slots=True)
class Change:
    """A row against the baseline: means are compared, since captures differ in length (totals do not)."""

    baseline_mean_us: float
    change_us: float
    change_pct: float | None  # None when the baseline mean is zero


@dataclass(frozen=True, slots=True)
class StageRow:
    keys: tuple  # the values of StatsResult.by
    clock: str
    summary: Summary
    share: float
    device_source: str | None = None  # GPU rows: "annotation", "kernels" or "mixed"
    baseline: Change | None = None


@dataclass(frozen=True, slots=True)
class IterationBreakdown:
    keys: tuple  # the values of StatsResult.scope
    summary: Summary  # of the decode iterations' host durations
    parts: dict[str, float]  # total microseconds per part, over all the iterations
    baseline: Change | None = None

    def part_mean(self, part: str) -> float:
        return self.parts[part] / self.summary.count

    def part_share(self, part: str) -> float:
        return self.parts[part] / self.summary.total_us if self.summary.total_us else 0.0


@dataclass(slots=True)
class StatsResult:
    inputs: list[str]
    by: tuple[str, ...]  # grouping keys in GROUP_KEYS order; "stage" always among them
    rows: list[StageRow]
    iterations: list[IterationBreakdown]
    warnings: list[str] = field(default_factory=list)
    baseline: str | None = None  # where the baseline came from

    @property
    def scope(self) -> tuple[str, ...]:
        return tuple(key for key in self.by if key in SCOPE_KEYS)

    def stage_of(self, row: StageRow) -> str:
        return row.keys[self.by.index("stage")]

    def to_json(self) -> dict:
        return {
            "inputs": self.inputs,
            "by": list(self.by),
            "percentiles": "nearest-rank",
            "baseline": self.baseline,
            "stages": [{**dict(zip(self.by, row.keys)), "clock": row.clock, **_summary_json(row.summary),
                        "share": round(row.share, 6), "device_source": row.device_source,
                        "baseline": change_json(row.baseline)} for row in self.rows],
            "iterations": [{**dict(zip(self.scope, it.keys)), **_summary_json(it.summary),
                            "parts": [{"part": part, "mean_us": us(it.part_mean(part)),
                                       "share": round(it.part_share(part), 6)} for part in PARTS],
                            "baseline": change_json(it.baseline)} for it in self.iterations],
            "warnings": self.warnings,
        }


def _summary_json(summary: Summary) -> dict:
    return {"count": summary.count, **{f"{name}_us": us(summary.statistic(name)) for name in STATISTICS[1:]}}


def change_json(change: Change | None) -> dict | None:
    if change is None:
        return None
    pct = None if change.change_pct is None else round(change.change_pct, 3)
    return {"mean_us": us(change.baseline_mean_us), "change_us": us(change.change_us), "change_pct": pct}


def group_keys(by: Iterable[str]) -> tuple[str, ...]:
    """The grouping keys asked for, in GROUP_KEYS order, with "stage" always among them."""
    wanted = {*by, "stage"}
    unknown = wanted - set(GROUP_KEYS)
    if unknown:
        raise ValueError(f"cannot group by {', '.join(sorted(unknown))}; expected some of {', '.join(GROUP_KEYS)}")
    return tuple(key for key in GROUP_KEYS if key in wanted)


def aggregate(measures: list[TraceMeasures], by: Iterable[str] = ()) -> StatsResult:
    by = group_keys(by)
    scope = [position for position, key in enumerate(by) if key in SCOPE_KEYS]
    samples: dict[tuple[tuple, str], list[float]] = defaultdict(list)
    sources: dict[tuple, set[str]] = defaultdict(set)
    for step in (step for m in measures for step in m.steps):
        key = tuple(getattr(step, name) for name in by)
        samples[key, CPU].append(step.cpu_us)
        if step.gpu_us is not None:
            samples[key, GPU].append(step.gpu_us)
            sources[key].add(step.device_source)
    summaries = {group: summarize(values) for group, values in samples.items()}
    whole: dict[tuple, float] = defaultdict(float)
    for (key, clock), summary in summaries.items():
        whole[tuple(key[i] for i in scope), clock] += summary.total_us
    rows = []
    for (key, clock), summary in summaries.items():
        total = whole[tuple(key[i] for i in scope), clock]
        source = None
        if clock == GPU:
            source = sources[key].pop() if len(sources[key]) == 1 else "mixed"
        rows.append(StageRow(key, clock, summary, summary.total_us / total if total else 0.0, source))
    # Biggest first within each clock and scope, so a table reads from where the time goes.
    rows.sort(key=lambda row: (CLOCKS.index(row.clock), _sortable(row.keys[i] for i in scope), -row.summary.total_us,
                               _sortable(row.keys)))
    return StatsResult([m.source for m in measures], by, rows, _breakdowns(measures, tuple(by[i] for i in scope)),
                       [warning for m in measures for warning in m.warnings])


def _breakdowns(measures: list[TraceMeasures], scope: tuple[str, ...]) -> list[IterationBreakdown]:
    grouped: dict[tuple, list[IterationTiming]] = defaultdict(list)
    for iteration in (it for m in measures for it in m.iterations):
        grouped[tuple(getattr(iteration, key) for key in scope)].append(iteration)
    return [IterationBreakdown(key, summarize(it.total_us for it in found),
                               {part: math.fsum(it.parts[part] for it in found) for part in PARTS})
            for key, found in sorted(grouped.items(), key=lambda item: _sortable(item[0]))]


def _sortable(values: Iterable) -> tuple:
    # None (no rank, no bs) sorts last and is never compared with a value.
    return tuple((value is None, value) for value in values)
