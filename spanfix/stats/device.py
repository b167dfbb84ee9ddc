"""Device time of step spans: their GPU annotation copies, or else the device work their launches queued.

A launch on a host thread (`cuda_runtime`, `cuda_driver`) and the kernels or memory copies it queued
share `args.correlation`. Those ids are unique within one rank only: a merged trace repeats them in
every rank, so launches and device work are joined within the rank's scope (ranks.scope_of). A pair
is used only when it is physically possible: one launch for the id, and no device work starting
before it. What breaks either rule is counted and reported, never measured.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import msgspec

from ..events import Stamp
from ..index import StepSpan, TraceIndex, Track, is_number, track_of
from ..ranks import scope_of
from ..reader import Event, Trace

DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_SUFFIXES = ("_runtime", "_driver")  # cuda_runtime, cuda_driver (ROCm traces keep these names too)
Interval = tuple[float, float]
# Why a launch's device work was not used.
SHARED_CORRELATION = "launches share their correlation id with another launch of the same rank (device work not used)"
BEFORE_LAUNCH = "launches whose device work starts before the launch itself (device work not used)"


def device_times(trace: Trace, index: TraceIndex) -> tuple[list[tuple[float | None, str | None]], list[str]]:
    """(device microseconds, "annotation" | "kernels") per step, (None, None) when nothing ran on a
    device; and what could not be used, one line each."""
    events = trace.events
    annotated = [_hull(filter(None, (_interval(events[i]) for i in step.gpu_events))) for step in index.steps]
    launched, problems = _launched_extents(trace, [step for step, extent in zip(index.steps, annotated)
                                                   if extent is None])
    times = []
    for step, extent in zip(index.steps, annotated):
        source = "annotation"
        if extent is None:
            extent, source = launched.get(step), "kernels"
        times.append((extent[1] - extent[0], source) if extent else (None, None))
    return times, [f"{count} {why}" for why, count in sorted(problems.items())]


def _launched_extents(trace: Trace, steps: list[StepSpan]) -> tuple[dict[StepSpan, Interval], Counter]:
    """For each step, the extent of the device work queued by the launches inside its CPU span."""
    if not steps:
        return {}, Counter()
    launches, problems = launch_table(trace)
    extents = {}
    for step in steps:
        found = launches.get(step.track, [])
        lo = bisect_left(found, step.span.start, key=_first)
        hi = bisect_right(found, step.span.end, key=_first)
        extent = _hull(work for _, work in found[lo:hi])
        if extent is not None:
            extents[step] = extent
    return extents, problems


def launch_table(trace: Trace) -> tuple[dict[Track, list[tuple[float, Interval]]], Counter]:
    """Per host track, its launches that queued usable device work, (launch time, extent of that
    work), sorted by time; and the count of launches whose device work could not be used, by why."""
    launches: dict[tuple, tuple[Track, float]] = {}
    shared: set[tuple] = set()
    device: dict[tuple, Interval] = {}
    # Every launch and kernel is read: on a large trace, each half of it by its own process.
    for part_launches, part_shared, part_device in trace.events.map(_Launched, _launch_tables):
        shared |= part_shared | (part_launches.keys() & launches.keys())
        launches.update(part_launches)
        for key, extent in part_device.items():
            # A CUDA graph launch starts many kernels under one correlation id, maybe in both halves.
            device[key] = _hull([extent, device[key]]) if key in device else extent
    table: dict[Track, list[tuple[float, Interval]]] = defaultdict(list)
    problems: Counter = Counter()
    for key, work in device.items():
        found = launches.get(key)
        if found is None:
            continue  # its launch was not captured
        if key in shared:
            problems[SHARED_CORRELATION] += 1
            continue
        track, start = found
        if work[0] < start - 4 * math.ulp(start):
            problems[BEFORE_LAUNCH] += 1
            continue
        table[track].append((start, work))
    for found in table.values():
        found.sort(key=_first)
    return dict(table), problems


def _launch_tables(events: Iterable) -> tuple[dict[tuple, tuple[Track, float]], set[tuple], dict[tuple, Interval]]:
    """From some events: the launches by (rank scope, correlation id), with their track and start;
    the ids more than one launch carries; and the extent of the device work queued under each id."""
    launches: dict[tuple, tuple[Track, float]] = {}
    shared: set[tuple] = set()
    device: dict[tuple, Interval] = {}
    for event in events:
        correlation = event.args.correlation if event.args is not None else None
        if not isinstance(correlation, (int, str)):
            continue
        key = scope_of(event.pid), correlation
        if event.cat in DEVICE_CATEGORIES:
            interval = _interval(event)
            if interval is not None:
                device[key] = _hull([interval, device[key]]) if key in device else interval
        elif isinstance(event.cat, str) and event.cat.endswith(LAUNCH_SUFFIXES) and is_number(event.ts):
            if key in launches:
                shared.add(key)
            launches[key] = track_of(event), float(event.ts)
    return launches, shared, device


class _Correlated(msgspec.Struct, gc=False):
    correlation: Any = None


class _Launched(msgspec.Struct, gc=False):
    """What the device join reads of every event (a launch, a kernel, or neither)."""

    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Stamp = None
    dur: Stamp = None
    args: _Correlated | None = None


def _first(pair: tuple) -> Any:
    return pair[0]


def _interval(event: Event) -> Interval | None:
    if is_number(event.ts) and is_number(event.dur) and event.dur >= 0:
        return float(event.ts), float(event.ts) + float(event.dur)
    return None


def _hull(intervals: Iterable[Interval]) -> Interval | None:
    intervals = list(intervals)
    if not intervals:
        return None
    return min(start for start, _ in intervals), max(end for _, end in intervals)


__all__ = ["BEFORE_LAUNCH", "DEVICE_CATEGORIES", "SHARED_CORRELATION", "device_times", "launch_table"]
