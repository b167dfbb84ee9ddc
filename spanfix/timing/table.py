"""Several traces' measures into one table: rows per stage (and grouping key) and clock, the decode
iteration breakdown per file or rank and clock, and (when asked for) the kernels of each."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UsageError
from .iterations import DEVICE_PARTS, PARTS
from .kernels import KernelTally
from .numbers import STATISTICS, Summary, summarize, us
from .profile import RunProfile, combined
from .rows import IterationTiming, StepTiming, TraceMeasures

if TYPE_CHECKING:
    import pandas

CPU, GPU = "cpu", "gpu"
CLOCKS = (CPU, GPU)
# The clocks as people read them, one table for every room: the word ("on the host clock"), a time
# read on it (a stage table's title) and the clock itself (the page's legend).
CLOCK_SAID = {CPU: ("host", "host time (CPU spans)", "host clock (CPU spans)"),
              GPU: ("device", "device time (GPU annotations, or launched kernels)",
                    "device clock (GPU annotations, or the kernels launched)")}
CLOCK_WORDS = {clock: said[0] for clock, said in CLOCK_SAID.items()}
CLOCK_TIMES = {clock: said[1] for clock, said in CLOCK_SAID.items()}
CLOCK_LONG = {clock: said[2] for clock, said in CLOCK_SAID.items()}
GROUP_KEYS = ("file", "rank", "stage", "name", "mode-name", "bs", "toks")  # every grouping key, in column order
SCOPE_KEYS = ("file", "rank")  # keys that split the whole (shares, iterations); the others split stages
ITERATION_KEYS = ("file", "rank", "bs")  # keys that split the decode iterations (bs: their verifies')


@dataclass(frozen=True, slots=True)
class Change:
    """A figure against the baseline: means are compared, since captures differ in length (totals do not)."""

    baseline_mean_us: float
    change_us: float
    change_pct: float | None  # None when the baseline mean is zero
    count: int | None = None  # spans (or iterations) measured here
    baseline_count: int | None = None  # and in the baseline (None: a saved result that did not say)


@dataclass(frozen=True, slots=True)
class StageRow:
    keys: tuple  # the values of StatsResult.by
    clock: str
    summary: Summary
    share: float
    device_source: str | None = None  # GPU rows: "annotation", "kernels" or "mixed"
    baseline: Change | None = None
    busy_us: float | None = None  # GPU rows: the time the spans' device work ran, where it was joined
    busy_share: float | None = None  # that time over the device extents of the same spans


@dataclass(frozen=True, slots=True)
class IterationBreakdown:
    keys: tuple  # the values of StatsResult.iteration_keys
    clock: str
    summary: Summary  # of the decode iterations' durations on this clock
    parts: dict[str, float]  # total microseconds per part, over all the iterations
    baseline: Change | None = None
    part_baselines: dict[str, Change | None] = field(default_factory=dict)
    part_summaries: dict[str, Summary] = field(default_factory=dict)  # each part's time per iteration

    def part_mean(self, part: str) -> float:
        return self.parts[part] / self.summary.count

    def part_share(self, part: str) -> float:
        return self.parts[part] / self.summary.total_us if self.summary.total_us else 0.0


@dataclass(frozen=True, slots=True)
class KernelGroup:
    """The kernels of one stage row (part None) or of one iteration part."""

    keys: tuple  # the values of StatsResult.by, or of StatsResult.iteration_keys for an iteration part
    part: str | None
    busy_us: float  # the group's device time: its spans' busy time, or the part's share of the device
    tally: KernelTally


@dataclass(slots=True)
class StatsResult:
    inputs: list[str]
    by: tuple[str, ...]  # grouping keys in GROUP_KEYS order; "stage" always among them
    rows: list[StageRow]
    iterations: list[IterationBreakdown]
    warnings: list[str] = field(default_factory=list)
    baseline: str | None = None  # where the baseline came from
    kernels: list[KernelGroup] | None = None  # when kernels were asked for
    kernel_categories: tuple[str, ...] = ()
    errors: list[str] = field(default_factory=list)  # inputs that could not be used, one line each
    notes: list[str] = field(default_factory=list)  # information, not a problem (what was not computed, and how)
    profile: RunProfile = field(default_factory=RunProfile)  # what kind of run the inputs are
    baseline_differences: list[str] = field(default_factory=list)  # how the baseline's run is unlike it
    # The baseline is these speculative inputs' plain twin: it serves the speedup, and its means (DECODE
    # steps, no decode iteration) are no baseline of theirs: no "mean vs baseline" is shown.
    plain_twin: bool = False
    no_iterations: str | None = None  # why there is no decode iteration, when there is none
    # spanfix.speculation's figures of the same inputs (anything with to_json()); timing does not know them.
    speculation: object | None = None

    @property
    def scope(self) -> tuple[str, ...]:
        return tuple(key for key in self.by if key in SCOPE_KEYS)

    @property
    def iteration_keys(self) -> tuple[str, ...]:
        return tuple(key for key in self.by if key in ITERATION_KEYS)

    def stage_of(self, row: StageRow) -> str:
        return row.keys[self.by.index("stage")]

    def iteration(self, clock: str = CPU, keys: tuple = ()) -> IterationBreakdown | None:
        """The decode iterations' breakdown on a clock (and for one file and rank when grouped by them)."""
        return next((it for it in self.iterations if it.clock == clock and (not keys or it.keys == keys)), None)

    def row(self, stage: str, clock: str = CPU, **keys: object) -> StageRow | None:
        """The stage row on a clock, e.g. result.row("VERIFY", "gpu"); other grouping keys by name
        (rank="TP1", bs=4; write mode-name as mode_name)."""
        wanted = {"stage": stage, **{key.replace("_", "-"): value for key, value in keys.items()}}
        positions = {self.by.index(key): value for key, value in wanted.items() if key in self.by}
        return next((row for row in self.rows if row.clock == clock
                     and all(row.keys[i] == value for i, value in positions.items())), None)

    def to_pandas(self) -> pandas.DataFrame:
        """The stage rows as a DataFrame: the grouping keys, clock, the statistics in microseconds, share,
        busy (the pandas extra)."""
        return data_frame([{key: value for key, value in row.items() if key != "baseline"}
                           for row in self.to_json()["stages"]])

    def to_json(self) -> dict:
        return {
            "inputs": self.inputs,
            "by": list(self.by),
            "percentiles": "nearest-rank",
            "baseline": self.baseline,
            "profile": self.profile.to_json(),
            "baseline_differences": self.baseline_differences,
            "baseline_is_plain_twin": self.plain_twin,
            "stages": [{**dict(zip(self.by, row.keys)), "clock": row.clock, **_summary_json(row.summary),
                        "share": round(row.share, 6), "device_source": row.device_source,
                        "busy_us": None if row.busy_us is None else us(row.busy_us),
                        "busy_share": None if row.busy_share is None else round(row.busy_share, 6),
                        "baseline": change_json(row.baseline)} for row in self.rows],
            "iterations": [{**dict(zip(self.iteration_keys, it.keys)), "clock": it.clock, **_summary_json(it.summary),
                            "parts": [{"part": part, "mean_us": us(it.part_mean(part)),
                                       **_part_percentiles(it.part_summaries.get(part)),
                                       "share": round(it.part_share(part), 6),
                                       "baseline": change_json(it.part_baselines.get(part))} for part in it.parts],
                            "baseline": change_json(it.baseline)} for it in self.iterations],
            "no_iterations": self.no_iterations,
            "kernels": None if self.kernels is None else self._kernels_json(),
            "speculation": None if self.speculation is None else self.speculation.to_json(),
            "warnings": self.warnings,
            "notes": self.notes,
        }

    def _kernels_json(self) -> dict:
        stages, parts = [], []
        for group in self.kernels:
            entry = {**dict(zip(self.by if group.part is None else self.iteration_keys, group.keys)),
                     **({} if group.part is None else {"part": group.part}), "busy_us": us(group.busy_us),
                     "kernels": [{"name": name, "category": group.tally.category_of[name], "count": count,
                                  "total_us": us(total), "mean_us": us(total / count),
                                  "share": _share(total, group.busy_us)}
                                 for name, count, total in kernel_rows(group.tally)],
                     "categories": [{"category": category, "count": count, "total_us": us(total),
                                     "share": _share(total, group.busy_us)}
                                    for category, count, total in category_rows(group.tally, self.kernel_categories)]}
            (stages if group.part is None else parts).append(entry)
        return {"categories": list(self.kernel_categories), "stages": stages, "iteration_parts": parts}


def _share(total: float, whole: float) -> float | None:
    return round(total / whole, 6) if whole else None


def kernel_rows(kernels: KernelTally) -> list[tuple[str, int, float]]:
    """(name, count, total) by total time, the largest first."""
    return sorted(((name, count, kernels.totals[name]) for name, count in kernels.counts.items()),
                  key=lambda row: (-row[2], row[0]))


def category_rows(kernels: KernelTally, order: Iterable[str]) -> list[tuple[str, int, float]]:
    """(category, count, total) for the categories that ran, largest first."""
    found = kernels.by_category()
    rank = {category: position for position, category in enumerate(order)}
    return sorted(((category, count, total) for category, (count, total) in found.items()),
                  key=lambda row: (-row[2], rank.get(row[0], len(rank))))


def _part_percentiles(summary: Summary | None) -> dict:
    return {name: None if summary is None else us(summary.statistic(name[:-3])) for name in ("p50_us", "p90_us")}


def _summary_json(summary: Summary) -> dict:
    return {"count": summary.count, **{f"{name}_us": us(summary.statistic(name)) for name in STATISTICS[1:]}}


def change_json(change: Change | None) -> dict | None:
    if change is None:
        return None
    pct = None if change.change_pct is None else round(change.change_pct, 3)
    return {"mean_us": us(change.baseline_mean_us), "change_us": us(change.change_us), "change_pct": pct,
            "count": change.baseline_count}


def group_keys(by: Iterable[str]) -> tuple[str, ...]:
    """The grouping keys asked for, in GROUP_KEYS order, with "stage" always among them."""
    wanted = {*by, "stage"}
    unknown = wanted - set(GROUP_KEYS)
    if unknown:
        raise UsageError(f"cannot group by {', '.join(sorted(unknown))}; expected some of {', '.join(GROUP_KEYS)}")
    return tuple(key for key in GROUP_KEYS if key in wanted)


def key_of(step: StepTiming, by: tuple[str, ...]) -> tuple:
    return tuple(getattr(step, name.replace("-", "_")) for name in by)


def aggregate(measures: list[TraceMeasures], by: Iterable[str] = (), *, kernel_categories: tuple[str, ...] = ()
              ) -> StatsResult:
    by = group_keys(by)
    scope = [position for position, key in enumerate(by) if key in SCOPE_KEYS]
    samples: dict[tuple[tuple, str], list[float]] = defaultdict(list)
    sources: dict[tuple, set[str]] = defaultdict(set)
    busy: dict[tuple, list[tuple[float, float]]] = defaultdict(list)  # (busy, extent) of spans with both
    kernel_ranges: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))  # key -> trace -> ranges
    for number, m in enumerate(measures):
        if m.kernels is not None:
            for step, ranges in zip(m.steps, m.kernels.steps):
                kernel_ranges[key_of(step, by)][number].append(ranges)
    for step in (step for m in measures for step in m.steps):
        key = key_of(step, by)
        samples[key, CPU].append(step.cpu_us)
        if step.gpu_us is not None:
            samples[key, GPU].append(step.gpu_us)
            sources[key].add(step.device_source)
            if step.busy_us is not None:
                busy[key].append((step.busy_us, step.gpu_us))
    summaries = {group: summarize(values) for group, values in samples.items()}
    whole: dict[tuple, float] = defaultdict(float)
    for (key, clock), summary in summaries.items():
        whole[tuple(key[i] for i in scope), clock] += summary.total_us
    rows = []
    for (key, clock), summary in summaries.items():
        total = whole[tuple(key[i] for i in scope), clock]
        source = busy_total = busy_share = None
        if clock == GPU:
            source = next(iter(sources[key])) if len(sources[key]) == 1 else "mixed"
            if busy[key]:
                busy_total = math.fsum(b for b, _ in busy[key])
                extents = math.fsum(e for _, e in busy[key])
                busy_share = busy_total / extents if extents else None
        rows.append(StageRow(key, clock, summary, summary.total_us / total if total else 0.0, source,
                             busy_us=busy_total, busy_share=busy_share))
    # Biggest first within each clock and scope, so a table reads from where the time goes.
    rows.sort(key=lambda row: (CLOCKS.index(row.clock), _sortable(row.keys[i] for i in scope), -row.summary.total_us,
                               _sortable(row.keys)))
    iterations, part_kernels = _breakdowns(measures, tuple(key for key in by if key in ITERATION_KEYS))
    groups = None
    if measures and any(m.kernels is not None for m in measures):
        groups = [KernelGroup(row.keys, None, row.busy_us or 0.0, _tally(measures, kernel_ranges[row.keys]))
                  for row in rows if row.clock == GPU and row.keys in kernel_ranges]
        groups += part_kernels
    warnings = [warning for m in measures for warning in m.warnings]
    warnings += _mostly_ambiguous(measures)
    notes = [note for m in measures for note in m.notes]
    return StatsResult([m.source for m in measures], by, rows, iterations, warnings, kernels=groups,
                       kernel_categories=kernel_categories, notes=notes,
                       profile=combined(measures),
                       no_iterations=None if iterations else _why_none(measures))


def _why_none(measures: list[TraceMeasures]) -> str | None:
    """Why no input has a decode iteration: each input's reason (one for all when they share it)."""
    said: dict[str, list[str]] = {}
    for m in measures:
        if m.no_iterations:
            said.setdefault(m.no_iterations, []).append(m.source)
    if not said:
        return None
    if len(said) == 1 and len(measures) == 1:
        return next(iter(said))
    return "; ".join(f"{', '.join(sources)}: {why}" for why, sources in said.items())


MOSTLY = 0.5


def _mostly_ambiguous(measures: list[TraceMeasures]) -> list[str]:
    """A trace whose step time is mostly in ambiguous spans measures little of what it is asked."""
    found = []
    for m in measures:
        total = math.fsum(step.cpu_us for step in m.steps)
        ambiguous = math.fsum(step.cpu_us for step in m.steps if step.stage == "ambiguous")
        if total and ambiguous / total > MOSTLY:
            found.append(f"{m.source}: {ambiguous / total:.0%} of the step time is in spans left ambiguous, which no "
                         "stage counts: `spanfix inspect` says what is missing (--algorithm, --num-steps, "
                         "server_args.json beside the trace, python stacks, a --draft-* rule)")
    return found


def _tally(measures: list[TraceMeasures], ranges: dict[int, list]) -> KernelTally:
    """One group's kernels over every trace it spans: each trace's table tallied, then merged."""
    result = KernelTally()
    for number, found in ranges.items():
        result.merge(measures[number].kernels.tally(found))
    return result


def _breakdowns(measures: list[TraceMeasures], scope: tuple[str, ...]
                ) -> tuple[list[IterationBreakdown], list[KernelGroup]]:
    grouped: dict[tuple, list[IterationTiming]] = defaultdict(list)
    part_ranges: dict[tuple, dict[str, dict[int, list]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for number, m in enumerate(measures):
        for position, iteration in enumerate(m.iterations):
            key = tuple(getattr(iteration, name) for name in scope)
            grouped[key].append(iteration)
            if m.kernels is not None:
                for part, ranges in m.kernels.iterations[position].items():
                    part_ranges[key][part][number].append(ranges)
    breakdowns, kernels = [], []
    for key, found in sorted(grouped.items(), key=lambda item: _sortable(item[0])):
        breakdowns.append(IterationBreakdown(key, CPU, summarize(it.cpu_us for it in found),
                                             {part: math.fsum(it.parts[part] for it in found) for part in PARTS},
                                             part_summaries={part: summarize(it.parts[part] for it in found)
                                                             for part in PARTS}))
        # Parts on the device need the device work; a GPU annotation alone gives the extent only.
        on_device = [it for it in found if it.gpu_parts is not None]
        if on_device:
            parts = {part: math.fsum(it.gpu_parts[part] for it in on_device) for part in DEVICE_PARTS}
            breakdowns.append(IterationBreakdown(key, GPU, summarize(it.gpu_us for it in on_device), parts,
                                                 part_summaries={part: summarize(it.gpu_parts[part] for it in on_device)
                                                                 for part in DEVICE_PARTS}))
            found = part_ranges.get(key, {})
            kernels += [KernelGroup(key, part, parts.get(part, 0.0), _tally(measures, found[part]))
                        for part in DEVICE_PARTS if part in found]
    breakdowns.sort(key=lambda it: (CLOCKS.index(it.clock), _sortable(it.keys)))
    return breakdowns, kernels


def _sortable(values: Iterable) -> tuple:
    # None (no rank, no bs) sorts last and is never compared with a value.
    return tuple((value is None, value) for value in values)


def data_frame(records: list[dict]) -> pandas.DataFrame:
    """Records as a pandas DataFrame, for every to_pandas(); UsageError naming the extra without pandas."""
    try:
        import pandas
    except ImportError:
        from ..runtime.extras import install_hint

        raise UsageError(f"to_pandas() needs pandas: {install_hint('pandas')}") from None
    return pandas.DataFrame.from_records(records)
