"""Device time of step spans: their GPU annotation copies, or else the kernels their launches started."""

from __future__ import annotations

import functools
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Hashable, Iterable
from typing import Any

import msgspec

from ..events import Stamp
from ..index import StepSpan, TraceIndex, Track, is_number, track_of
from ..reader import Event, Trace

DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


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
    extents = {}
    for step in steps:
        found = launches.get(step.track, [])
        lo = bisect_left(found, step.span.start, key=_first)
        hi = bisect_right(found, step.span.end, key=_first)
        extent = _hull([device[c] for _, c in found[lo:hi] if c in device])
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
