"""stats: per-stage timing of step spans on the host and on the device, and where a decode iteration goes.

The library computes and never prints (render/stats.py draws the result, cli/stats.py prints it).
Definitions, also given in the README:

- stage: the stage word of the newer naming (DRAFT, VERIFY, EXTEND, DECODE, ...), from the same
  attribution relabel uses; spans whose attribution stays ambiguous form their own row, `ambiguous`.
- host time (clock "cpu"): the step's CPU span, end minus start.
- device time (clock "gpu"): from the first start to the last end of the step's GPU annotation copies
  (one per device and stream it launched work on: overlap counts once, gaps between them count too).
  A step without a copy (Kineto leaves none for replayed CUDA graphs) falls back to the kernels and
  memory copies its launches started: the launch events inside its CPU span on its track, linked to
  the device events by `args.correlation`, again from the first start to the last end. Each GPU row
  says which source it used: "annotation", "kernels" or "mixed". A step with neither has no device time.
- percentiles: nearest rank, the smallest value v such that at least q% of the values are <= v.
  Always one of the measured values, never an interpolation.
- share: a row's total over the total of every step span on the same clock within the same file and
  rank when the rows are grouped by them, else over all inputs.
- decode iteration: a `scheduler.run_batch` span (or, in a process without one, a window from a `draft`
  stage span to the end of the `draft_extend` after the verify) that holds a VERIFY step; see
  `decode_iterations`.
"""

from __future__ import annotations

import functools
import math
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec
import orjson

from .attribute import AMBIGUOUS, DRAFT, TARGET, Attribution
from .events import Stamp
from .index import StepSpan, TraceIndex, Track, is_number, track_of
from .intervals import RangeHull
from .naming import new_stage, relabel_step_name
from .reader import Event, Trace, TraceError, read_document_bytes
from .relabel import RelabelOptions, analyse
from .relabel import load as load_trace

CPU, GPU = "cpu", "gpu"
CLOCKS = (CPU, GPU)
GROUP_KEYS = ("file", "rank", "stage", "name", "bs")  # every grouping key, in column order
SCOPE_KEYS = ("file", "rank")  # keys that split the whole (shares, iterations); the others split stages
STATISTICS = ("count", "total", "mean", "p50", "p90", "p99", "max")
PERCENTILES = (50, 90, 99)
PARTS = ("draft", "verify", "draft_extend", "other")  # of a decode iteration
AMBIGUOUS_STAGE = "ambiguous"
# Step stages that are draft-side work: the draft runner's steps and the workers' own graph spans.
DRAFT_WORK = frozenset({"DRAFT", "DRAFT_LOOP", "DRAFT_EXTEND_V2"})
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})

# SGLang's per-rank file names and the merger's pids (docs/step-spans.md, section 5).
_RANK_IN_FILE = re.compile(r"-TP-(\d+)(?:-DP-(\d+))?(?:-PP-(\d+))?(?:-EP-(\d+))?")
_RANK_IN_PID = re.compile(r"\[TP(\d+)-DP(\d+)-PP(\d+)-EP(\d+)\]")


@dataclass(frozen=True, slots=True)
class StepTiming:
    """One step span, measured, with every key it can be grouped by."""

    file: str
    rank: str | None
    stage: str
    name: str  # under the newer naming when attributed, else as written
    bs: int | None
    cpu_us: float
    gpu_us: float | None  # None: no GPU copy and no kernel found
    device_source: str | None  # "annotation" or "kernels"


@dataclass(frozen=True, slots=True)
class IterationTiming:
    """One decode iteration: its host duration and the microseconds of it spent in each of PARTS."""

    file: str
    rank: str | None
    total_us: float
    parts: dict[str, float]


@dataclass(slots=True)
class TraceMeasures:
    source: str
    steps: list[StepTiming]
    iterations: list[IterationTiming]
    warnings: list[str]


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
                        "baseline": _change_json(row.baseline)} for row in self.rows],
            "iterations": [{**dict(zip(self.scope, it.keys)), **_summary_json(it.summary),
                            "parts": [{"part": part, "mean_us": _us(it.part_mean(part)),
                                       "share": round(it.part_share(part), 6)} for part in PARTS],
                            "baseline": _change_json(it.baseline)} for it in self.iterations],
            "warnings": self.warnings,
        }


def _us(value: float) -> float:
    return round(value, 3)  # nanoseconds: what Kineto's timestamps can resolve


def _summary_json(summary: Summary) -> dict:
    return {"count": summary.count, **{f"{name}_us": _us(summary.statistic(name)) for name in STATISTICS[1:]}}


def _change_json(change: Change | None) -> dict | None:
    if change is None:
        return None
    pct = None if change.change_pct is None else round(change.change_pct, 3)
    return {"mean_us": _us(change.baseline_mean_us), "change_us": _us(change.change_us), "change_pct": pct}


# ---------------------------------------------------------------------------------------------------
# Numbers


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


def format_us(us: float) -> str:
    """A duration for people: 850 us, 12.35 ms, 1.234 s."""
    if abs(us) < 1_000:
        return f"{us:.1f} us"
    if abs(us) < 1_000_000:
        return f"{us / 1_000:.2f} ms"
    return f"{us / 1_000_000:.3f} s"


# ---------------------------------------------------------------------------------------------------
# One trace


def load(source: str, options: RelabelOptions) -> tuple[Trace, TraceIndex, Attribution, list[str]]:
    """Read, index and attribute one trace, exactly as relabel does."""
    trace = load_trace(source, options)
    return (trace, *analyse(trace, options))


def measure(trace: Trace, index: TraceIndex, attribution: Attribution, warnings: Iterable[str] = ()) -> TraceMeasures:
    file_rank = rank_from_file_name(trace.source)
    stages = [stage_of(step, verdict.role) for step, verdict in zip(index.steps, attribution.verdicts)]
    steps = []
    for step, verdict, stage, (gpu_us, source) in zip(index.steps, attribution.verdicts, stages,
                                                      device_times(trace, index)):
        attributed = verdict.role in (DRAFT, TARGET)
        name = relabel_step_name(step.name, is_draft=verdict.role == DRAFT) if attributed else step.name
        steps.append(StepTiming(trace.source, rank_from_pid(step.track[0]) or file_rank, stage, name, step.step.bs,
                                step.span.end - step.span.start, gpu_us, source))
    iterations = [IterationTiming(trace.source, rank_from_pid(pid) or file_rank, total, parts)
                  for pid, total, parts in decode_iterations(index, stages)]
    notes = [f"{trace.source}: {warning}" for warning in (*trace.warnings, *warnings)]
    if not index.steps:
        notes.append(f"{trace.source}: no step spans")
    return TraceMeasures(trace.source, steps, iterations, notes)


def measure_file(source: str, options: RelabelOptions) -> TraceMeasures:
    return measure(*load(source, options))


def measure_files(sources: Iterable[str], options: RelabelOptions) -> tuple[list[TraceMeasures], list[str]]:
    """Every readable input measured, and one line per input that could not be used."""
    measures, errors = [], []
    for source in sources:
        try:
            measures.append(measure_file(source, options))
        except TraceError as exc:
            errors.append(str(exc))
    return measures, errors


def stage_of(step: StepSpan, role: str) -> str:
    if role == AMBIGUOUS:
        return AMBIGUOUS_STAGE
    if role in (DRAFT, TARGET):
        return new_stage(step.step.mode, is_draft=role == DRAFT)
    return step.step.mode  # a worker's own span, a span already named the new way, an unknown mode


def rank_from_file_name(source: str) -> str | None:
    match = _RANK_IN_FILE.search(Path(source).name)
    return _rank_label(match.groups()) if match else None


def rank_from_pid(pid: Hashable) -> str | None:
    match = _RANK_IN_PID.match(pid) if isinstance(pid, str) else None
    return _rank_label(match.groups()) if match else None


def _rank_label(parts: Sequence[str | None]) -> str:
    """TP1, TP0-DP1, ...: numbers unpadded and zero DP/PP/EP left out, so that a per-rank file
    (-TP-1) and the same rank in a merged trace ([TP01-DP00-PP00-EP00]) get the same label."""
    tp, *others = parts
    return f"TP{int(tp)}" + "".join(f"-{kind}{int(value)}" for kind, value in zip(("DP", "PP", "EP"), others)
                                    if value is not None and int(value))


# ---------------------------------------------------------------------------------------------------
# Device time


def device_times(trace: Trace, index: TraceIndex) -> list[tuple[float | None, str | None]]:
    """(device microseconds, "annotation" | "kernels") per step, (None, None) when nothing ran on a device."""
    events = trace.events
    annotated = [_hull(filter(None, (_interval(events[i]) for i in step.gpu_events))) for step in index.steps]
    launched = _launched_extents(trace, [step for step, extent in zip(index.steps, annotated) if extent is None])
    times = []
    for step, extent in zip(index.steps, annotated):
        source = "annotation"
        if extent is None:
            extent, source = launched.get(step), "kernels"
        times.append((extent[1] - extent[0], source) if extent else (None, None))
    return times


def _launched_extents(trace: Trace, steps: list[StepSpan]) -> dict[StepSpan, tuple[float, float]]:
    """For each step, the extent of the device work started by the launches inside its CPU span."""
    if not steps:
        return {}
    tracks = {step.track for step in steps}
    launches: dict[Track, list[tuple[float, Hashable]]] = defaultdict(list)
    device: dict[Hashable, tuple[float, float]] = {}
    # Every launch and kernel is read: on a large trace, each half of it by its own process.
    for part_launches, part_device in trace.events.map(_Launched, functools.partial(_launch_tables, tracks=tracks)):
        for track, found in part_launches.items():
            launches[track] += found
        for correlation, extent in part_device.items():
            # A CUDA graph launch starts many kernels under one correlation id, maybe in both halves.
            device[correlation] = _hull([extent, device[correlation]]) if correlation in device else extent
    for found in launches.values():
        found.sort(key=_first)
    # Hulls of runs of launches in constant time each, so that nested steps cost no more than the
    # launches (each would otherwise scan nearly all of them).
    hulls = {track: RangeHull([device.get(c) for _, c in found]) for track, found in launches.items()}
    extents = {}
    for step in steps:
        found = launches.get(step.track, [])
        lo = bisect_left(found, step.span.start, key=_first)
        hi = bisect_right(found, step.span.end, key=_first)
        extent = hulls[step.track].hull(lo, hi) if hi > lo else None
        if extent is not None:
            extents[step] = extent
    return extents


def _launch_tables(events: Iterable, tracks: set[Track]
                   ) -> tuple[dict[Track, list[tuple[float, Hashable]]], dict[Hashable, tuple[float, float]]]:
    """From some events: the launches on the given tracks, (start, correlation id), and the device
    extent of each correlation id's kernels and copies."""
    launches: dict[Track, list[tuple[float, Hashable]]] = defaultdict(list)
    device: dict[Hashable, tuple[float, float]] = {}
    for event in events:
        correlation = event.args.correlation if event.args is not None else None
        if not isinstance(correlation, (int, str)):
            continue
        if event.cat in DEVICE_CATEGORIES:
            interval = _interval(event)
            if interval is not None:
                device[correlation] = _hull([interval, device[correlation]]) if correlation in device else interval
            continue
        track = track_of(event)
        if track in tracks and is_number(event.ts):
            launches[track].append((float(event.ts), correlation))
    return dict(launches), device


class _Correlated(msgspec.Struct, gc=False):
    correlation: Any = None


class _Launched(msgspec.Struct, gc=False):
    """What the kernel fallback reads of every event (a launch, a kernel, or neither)."""

    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Stamp = None
    dur: Stamp = None
    args: _Correlated | None = None


def _first(pair: tuple) -> float:
    return pair[0]


def _interval(event: Event) -> tuple[float, float] | None:
    if is_number(event.ts) and is_number(event.dur) and event.dur >= 0:
        return float(event.ts), float(event.ts) + float(event.dur)
    return None


def _hull(intervals: Iterable[tuple[float, float]]) -> tuple[float, float] | None:
    intervals = list(intervals)
    if not intervals:
        return None
    return min(start for start, _ in intervals), max(end for _, end in intervals)


# ---------------------------------------------------------------------------------------------------
# Decode iterations


@dataclass(slots=True)
class _ProcessSpans:
    runs: list[tuple[float, float]] = field(default_factory=list)  # scheduler.run_batch windows
    items: list[tuple[float, str, float]] = field(default_factory=list)  # (start, kind, duration)


def decode_iterations(index: TraceIndex, stages: list[str]) -> list[tuple[Hashable, float, dict[str, float]]]:
    """(pid, duration, microseconds per part) for every decode iteration, host clock.

    Iterations are the `scheduler.run_batch` spans of a process; in a process without any (SGLang
    before mid-2026), a window from a `draft` stage span to the end of the `draft_extend` span that
    follows a verify. An iteration is a decode iteration when it holds a VERIFY step. Work is matched
    to the iteration in which it starts, on any track of the same process (a draft worker may have a
    thread of its own). Its parts:
      draft         `draft` stage spans, and draft work (DRAFT steps, DRAFT_LOOP and DRAFT_EXTEND_V2
                    worker spans) outside any stage span that starts before the first VERIFY;
      verify        VERIFY steps;
      draft_extend  `draft_extend` stage spans, and draft work outside stage spans after the first VERIFY
                    (every algorithm drafts before verifying and extends after);
      other         the rest of the iteration: scheduling, sampling, ambiguous steps, idle gaps.
    """
    processes: dict[Hashable, _ProcessSpans] = defaultdict(_ProcessSpans)
    for (pid, _), spans in index.spans.items():
        for span in spans:
            if span.kind == "iteration":
                processes[pid].runs.append((span.start, span.end))
            elif span.kind == "stage":
                processes[pid].items.append((span.start, span.name, span.end - span.start))
    for step, stage in zip(index.steps, stages):
        span = step.span
        if stage == "VERIFY":
            kind = "verify"
        elif stage in DRAFT_WORK and index.nearest(span, "stage") is None:
            kind = "draft work"
        else:
            continue
        processes[step.track[0]].items.append((span.start, kind, span.end - span.start))

    found = []
    for pid, spans in processes.items():
        items = sorted(spans.items)
        starts = [start for start, _, _ in items]
        for start, end in _outermost(spans.runs) or _stage_windows(items):
            members = items[bisect_left(starts, start):bisect_right(starts, end)]
            verifies = [item_start for item_start, kind, _ in members if kind == "verify"]
            if not verifies:
                continue
            parts = dict.fromkeys(PARTS, 0.0)
            for item_start, kind, duration in members:
                if kind == "draft work":
                    kind = "draft" if item_start < verifies[0] else "draft_extend"
                parts[kind] += duration
            parts["other"] = max(0.0, (end - start) - math.fsum(parts.values()))
            found.append((pid, end - start, parts))
    return found


def _outermost(runs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The windows in order, less those that start inside an earlier one: an iteration nested in
    another is part of it (real traces have none), and windows that overlap would each count the
    same work, the square of the input when thousands nest."""
    kept: list[tuple[float, float]] = []
    for start, end in sorted(runs, key=lambda run: (run[0], -run[1])):  # by start, the longest first
        if not kept or start >= kept[-1][1]:
            kept.append((start, end))
    return kept


def _stage_windows(items: list[tuple[float, str, float]]) -> list[tuple[float, float]]:
    windows = []
    opened, verified = None, False
    for start, kind, duration in items:
        if kind == "draft":
            opened, verified = start, False
        elif kind == "verify":
            verified = opened is not None
        elif kind == "draft_extend" and verified:
            windows.append((opened, start + duration))
            opened, verified = None, False
    return windows


# ---------------------------------------------------------------------------------------------------
# Several traces into one table


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


# ---------------------------------------------------------------------------------------------------
# Baseline


@dataclass(frozen=True, slots=True)
class Baseline:
    source: str
    means: dict[tuple, float]  # (match key, clock) -> mean_us of a stage row
    iteration_means: dict[tuple, float]  # match key of the scope -> mean_us of the decode iterations


def load_baseline(source: str, options: RelabelOptions, by: Iterable[str]) -> Baseline:
    """A baseline from a trace (measured like the inputs) or from a saved `spanfix stats --format json`."""
    by = group_keys(by)
    try:
        document = aggregate([measure(*load(source, options))], by).to_json()
    except TraceError:
        document = _saved_result(source)
        if document is None:
            raise
    return baseline_from_json(document, by, source)


def _saved_result(source: str) -> dict | None:
    data, _ = read_document_bytes(source)
    try:
        document = orjson.loads(memoryview(data))
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) and isinstance(document.get("stages"), list) else None


def baseline_from_json(document: dict, by: tuple[str, ...], source: str) -> Baseline:
    saved_by = tuple(document.get("by") or ("stage",))
    if saved_by != by:
        raise TraceError(f"{source}: the baseline is grouped by {'+'.join(saved_by)}, these stats by "
                         f"{'+'.join(by)}; ask for the same --by")
    scope = tuple(key for key in by if key in SCOPE_KEYS)
    try:
        means = {(_match_key(by, [row[key] for key in by]), row["clock"]): float(row["mean_us"])
                 for row in document["stages"]}
        iteration_means = {_match_key(scope, [it[key] for key in scope]): float(it["mean_us"])
                           for it in document.get("iterations") or []}
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"{source}: not a spanfix stats result (bad or missing {exc})") from None
    return Baseline(source, means, iteration_means)


def _match_key(names: Sequence[str], values: Sequence) -> tuple:
    # Files match by base name, so that a baseline captured or saved elsewhere lines up.
    return tuple(Path(value).name if name == "file" and isinstance(value, str) else value
                 for name, value in zip(names, values))


def compare(result: StatsResult, baseline: Baseline) -> StatsResult:
    """Each row's mean against the baseline's, both at the nanosecond precision a saved result keeps."""
    rows = [replace(row, baseline=_change(row.summary.mean_us,
                                          baseline.means.get((_match_key(result.by, row.keys), row.clock))))
            for row in result.rows]
    iterations = [replace(it, baseline=_change(it.summary.mean_us,
                                               baseline.iteration_means.get(_match_key(result.scope, it.keys))))
                  for it in result.iterations]
    return replace(result, rows=rows, iterations=iterations, baseline=baseline.source)


def _change(mean_us: float, baseline_us: float | None) -> Change | None:
    if baseline_us is None:
        return None
    change = _us(mean_us) - baseline_us
    return Change(baseline_us, change, change / baseline_us * 100 if baseline_us else None)
