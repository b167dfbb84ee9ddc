"""Comparing a stats result with a baseline: another trace, or a saved `stats --format json` result.

Means are compared (captures differ in length, totals would not be): every stage row's on its clock,
and every decode iteration's, whole and by part, on both clocks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from ..errors import TraceError, UsageError
from .measure import TraceMeasures
from .numbers import us
from .profile import RunProfile, differences
from .table import CLOCKS, CPU, GPU, ITERATION_KEYS, Change, StatsResult, aggregate, group_keys


@dataclass(frozen=True, slots=True)
class Baseline:
    source: str
    means: dict[tuple, float]  # (match key, clock) -> mean_us of a stage row
    iteration_means: dict[tuple, float]  # (match key of the iteration keys, clock) -> mean_us of the decode iterations
    part_means: dict[tuple, float]  # (match key of the iteration keys, clock, part) -> mean_us of the part
    counts: dict[tuple, int] = field(default_factory=dict)  # the same keys -> spans or iterations measured
    profile: RunProfile | None = None  # what kind of run it was (None: a result saved before profiles)

    @property
    def has_device_iterations(self) -> bool:
        return any(clock == GPU for _, clock in self.iteration_means)

    def has_clock(self, clock: str) -> bool:
        return any(key[1] == clock for key in (*self.means, *self.iteration_means))

    def subjects(self) -> dict[str, float]:
        """Every mean of a baseline grouped by stage alone, named as check's regression rules name them
        (`VERIFY.gpu.mean`, `iteration.cpu.draft.mean`)."""
        found = {f"{key[0]}.{clock}.mean": mean for (key, clock), mean in self.means.items() if len(key) == 1}
        found.update({f"iteration.{clock}.mean": mean for (key, clock), mean in self.iteration_means.items()
                      if not key})
        found.update({f"iteration.{clock}.{part}.mean": mean for (key, clock, part), mean in self.part_means.items()
                      if not key and part in ("draft", "verify", "draft_extend")})
        return found


@dataclass(frozen=True, slots=True)
class BaselineRead:
    """A baseline read and measured once, for every comparison made with it (timing's means here, the
    speculation's plain DECODE steps in speculation/baseline.py): a trace's measures, with what the
    `then` of its measuring added, or a saved result's document."""

    source: str
    measures: TraceMeasures | None = None
    document: dict | None = None
    others: tuple[TraceMeasures, ...] = ()  # the further traces of a baseline given as several (one twin)
    repeated: tuple[str, ...] = ()  # a warning per trace counted once with another (a copy given again)

    @property
    def every(self) -> list[TraceMeasures]:
        """Every trace of the baseline ([] for a saved result)."""
        return [] if self.measures is None else [self.measures, *self.others]

    def timing(self, by: Iterable[str]) -> Baseline:
        """The means to compare stats grouped by `by` with (TraceError: a saved result grouped otherwise)."""
        by = group_keys(by)
        document = aggregate(self.every, by).to_json() if self.measures is not None else self.document
        return baseline_from_json(document or {}, by, self.source)

    @classmethod
    def together(cls, reads: Sequence[BaselineRead]) -> BaselineRead:
        """Several baselines as one (`--baseline` given more than once, or a glob): their traces are one
        twin, their means taken together, each capture once as an input's is (a copy given again would
        count its decode iterations twice, and narrow the speedup's interval on no new evidence). A
        saved result stands alone (UsageError beside others)."""
        from .once import counted_once

        if len(reads) == 1:
            return reads[0]
        saved = [read.source for read in reads if read.measures is None]
        if saved:
            raise UsageError(f"--baseline {saved[0]}: a saved stats result is a baseline of its own; several "
                             "baselines are traces (measured together as one plain twin)")
        kept, repeated = counted_once([m for read in reads for m in read.every])
        return cls(", ".join(read.source for read in reads), kept[0], others=tuple(kept[1:]),
                   repeated=tuple(f"baseline {line}" for line in repeated))


def validate_saved(document: dict, source: str) -> None:
    """A saved stats result is an input like any other: every field the comparison reads must be what
    `stats --format json` writes, or it is refused whole (exit 2) rather than compared with."""
    by = document.get("by", ["stage"])
    if not isinstance(by, list) or not all(isinstance(key, str) for key in by):
        _not_saved(source, f"'by' is {_shown(by)}, not a list of grouping keys")
    stages = document.get("stages")
    if not isinstance(stages, list):
        _not_saved(source, f"'stages' is {_shown(stages)}, not a list")
    for number, row in enumerate(stages):
        _check_row(source, row, f"stages[{number}]", [*by, "clock"])
    iterations = document.get("iterations") or []
    if not isinstance(iterations, list):
        _not_saved(source, f"'iterations' is {_shown(iterations)}, not a list")
    for number, it in enumerate(iterations):
        _check_row(source, it, f"iterations[{number}]", [])
        parts = it.get("parts") or []
        if not isinstance(parts, list):
            _not_saved(source, f"iterations[{number}].parts is {_shown(parts)}, not a list")
        for k, part in enumerate(parts):
            _check_row(source, part, f"iterations[{number}].parts[{k}]", ["part"], counted=False)


def _check_row(source: str, row: object, where: str, keys: list[str], counted: bool = True) -> None:
    if not isinstance(row, dict):
        _not_saved(source, f"{where} is {_shown(row)}, not an object")
    missing = [key for key in keys if key not in row]
    if missing:
        _not_saved(source, f"{where} has no {', '.join(missing)}")
    if "clock" in row and row["clock"] not in CLOCKS:
        _not_saved(source, f"{where}.clock is {_shown(row['clock'])}, not one of {', '.join(CLOCKS)}")
    mean = row.get("mean_us")
    # A mean is a time: a finite number of microseconds, 0 or more (0 when every span had no duration).
    if not isinstance(mean, (int, float)) or isinstance(mean, bool) or not math.isfinite(mean) or mean < 0:
        _not_saved(source, f"{where}.mean_us is {_shown(mean)}, not a time in microseconds")
    count = row.get("count")
    if counted and count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        _not_saved(source, f"{where}.count is {_shown(count)}, not a count")


def _not_saved(source: str, problem: str) -> None:
    raise TraceError(f"{source}: not a spanfix stats result ({problem})")


def _shown(value: object) -> str:
    return orjson.dumps(value, default=repr).decode()[:60]  # JSON: control characters escaped


def baseline_from_json(document: dict, by: tuple[str, ...], source: str) -> Baseline:
    validate_saved(document, source)
    saved_by = tuple(document.get("by") or ("stage",))
    if saved_by != by:
        raise TraceError(f"{source}: the baseline is grouped by {'+'.join(saved_by)}, these stats by "
                         f"{'+'.join(by)}; ask for the same --by")
    scope = tuple(key for key in by if key in ITERATION_KEYS)
    try:
        means, counts = {}, {}
        for row in document["stages"]:
            key = _match_key(by, [row[name] for name in by]), row["clock"]
            means[key], counts[key] = float(row["mean_us"]), _count(row)
        iteration_means, part_means = {}, {}
        for it in document.get("iterations") or []:
            key = _match_key(scope, [it[name] for name in scope]), it.get("clock", CPU)  # older results: host only
            iteration_means[key], counts[key] = float(it["mean_us"]), _count(it)
            for part in it.get("parts") or []:
                part_means[(*key, part["part"])] = float(part["mean_us"])
                counts[(*key, part["part"])] = counts[key]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceError(f"{source}: not a spanfix stats result (bad or missing {exc})") from None
    return Baseline(source, means, iteration_means, part_means, counts, RunProfile.from_json(document.get("profile")))


def _count(row: dict) -> int | None:
    count = row.get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _match_key(names: Sequence[str], values: Sequence) -> tuple:
    # Files match by base name, so that a baseline captured or saved elsewhere lines up.
    return tuple(Path(value).name if name == "file" and isinstance(value, str) else value
                 for name, value in zip(names, values))


def compare(result: StatsResult, baseline: Baseline, *, twin: bool = False) -> StatsResult:
    """Each mean against the baseline's, both at the nanosecond precision a saved result keeps. twin:
    the baseline is the inputs' plain twin (decided where the speculation figures are: runs/baseline.py)."""
    rows = []
    for row in result.rows:
        key = _match_key(result.by, row.keys), row.clock
        rows.append(replace(row, baseline=_change(row.summary.mean_us, baseline.means.get(key), row.summary.count,
                                                  baseline.counts.get(key))))
    iterations = []
    for it in result.iterations:
        key = _match_key(result.iteration_keys, it.keys), it.clock
        count = it.summary.count
        parts = {part: _change(it.part_mean(part), baseline.part_means.get((*key, part)), count,
                               baseline.counts.get((*key, part))) for part in it.parts}
        iterations.append(replace(it, baseline=_change(it.summary.mean_us, baseline.iteration_means.get(key), count,
                                                       baseline.counts.get(key)), part_baselines=parts))
    unlike = [] if baseline.profile is None else differences(result.profile, baseline.profile, twin=twin)
    return replace(result, rows=rows, iterations=iterations, baseline=baseline.source, baseline_differences=unlike,
                   plain_twin=twin)


def _change(mean_us: float, baseline_us: float | None, count: int | None = None,
            baseline_count: int | None = None) -> Change | None:
    if baseline_us is None:
        return None
    change = us(mean_us) - baseline_us
    return Change(baseline_us, change, change / baseline_us * 100 if baseline_us else None, count, baseline_count)
