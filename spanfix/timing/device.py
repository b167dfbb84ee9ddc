"""Device work: every launch joined to the kernels and memory copies it queued, and what a host span
(a step, a stage span, an iteration) launched.

A launch on a host thread (`cuda_runtime`, `cuda_driver`) and the device work it queued share
`args.correlation`; a `cudaGraphLaunch` queues a whole graph's kernels under one id. Those ids are
unique within one rank only: a merged trace repeats them in every rank, so launches and device work
are joined within the rank's scope (ranks.scope_of). A pair is used only when it is physically
possible: one launch for the id, and no device work starting before it. What breaks either rule is
counted and reported, never measured.

Reading every launch and kernel of a large trace is most of what stats costs, so it happens while
the trace is read: `DeviceReducer` turns each stretch of decoded events into plain columns where
the stretch was read (both halves of a large trace at once), and `DeviceWork.joined` joins the
stretches' columns. Device work is held as numbered items; the items a launch queued are numbered
consecutively, so that a span's work is a few ranges of numbers.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..events import Stamp
from ..index import Span, Track, hashable
from ..intervals import RangeHull
from ..ranks import scope_of

DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_SUFFIXES = ("_runtime", "_driver")  # cuda_runtime, cuda_driver (ROCm traces keep these names too)
Interval = tuple[float, float]
# Why a launch's device work was not used.
SHARED_CORRELATION = "correlation ids that several launches of one rank share (their device work not used)"
BEFORE_LAUNCH = "launches whose device work starts before the launch itself (device work not used)"
UNION_SKIPPED = ("step spans without busy time: their device work overlaps on several streams and they nest in "
                 "one another, so that their unions would cost the square of the trace")
SPLIT_SKIPPED = ("decode iterations not measured on the device clock: their device extents each hold the work of "
                 "thousands of others (a kernel running to the end of the trace?), so that splitting them would "
                 "cost the square of the trace")
# A step's busy time over several streams sorts its items, and an iteration's split on the device
# clock walks the items that start in its extent. Steps do not nest and extents barely overlap, so
# a trace walks each item about once. Hostile input can make them walk every item once per step or
# iteration: past this many items walked per item of the trace (and the allowance), the step gets no
# busy time, the iteration no device clock, and a warning counts them.
BUDGET, ALLOWANCE = 8, 2**16
_CATEGORY = operator.attrgetter("cat")
_NUMBERS = frozenset({int, float})
_IDS = frozenset({int, str})


@dataclass(slots=True)
class DeviceColumns:
    """The launches and device work of one stretch of events, as plain columns that pickle fast.
    Rank scopes and tracks are numbered: `scopes[i]`, `tracks[i]`."""

    scopes: list  # rank scope of each number
    tracks: list[Track]  # host track of each number
    launch_scopes: array  # per launch: its scope's number
    launch_ids: list  # per launch: correlation id
    launch_tracks: array  # per launch: its track's number
    launch_times: array
    item_scopes: array  # per device item
    item_ids: list
    starts: array
    ends: array
    categories: list[str]
    names: list[str] | None  # the distinct kernel names, when they were read
    name_ids: array | None  # per device item: its name's number in names
    first_time: float | None = None  # the earliest timestamp of any event of the stretch


_TS, _DUR, _PID, _TID, _ARGS, _NAME = map(operator.attrgetter, ("ts", "dur", "pid", "tid", "args", "name"))
_CORRELATION = operator.attrgetter("args.correlation")


class _Correlated(msgspec.Struct, gc=False):
    correlation: Any = None


class _Light(msgspec.Struct, gc=False):
    """What the device view reads of every event, and the name the reader chooses events by."""

    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Stamp = None
    dur: Stamp = None
    args: _Correlated | None = None


@dataclass(frozen=True, slots=True)
class DeviceReducer:
    """A stretch of decoded events -> DeviceColumns (a reader's reduce: it runs where the stretch is read).

    A stretch is hundreds of thousands of events: the launches and the device work are picked by
    category with C-level maps, then one comprehension each keeps the usable ones (a correlation id,
    a finite time and, for device work, a duration not negative), checking each value by its class.
    Measured against taking each field with a C-level map and checking the columns whole, and against
    decoding only those events, typed, from their raw bytes: both were slower (docs/performance.md)."""

    names: bool = False  # keep each kernel's name (for --kernels)
    item = _Light

    def __call__(self, events: list) -> DeviceColumns:
        categories = _hashables(list(map(_CATEGORY, events)))
        distinct = set(categories)
        device = DEVICE_CATEGORIES.intersection(distinct)
        launch = {c for c in distinct if isinstance(c, str) and c.endswith(LAUNCH_SUFFIXES)}
        inf = math.inf
        # One comprehension each, checking every value by its class: a million events, no calls.
        items = [(e.pid, a.correlation, ts, d, e.cat, e.name)
                 for e in itertools.compress(events, map(device.__contains__, categories))
                 if (a := e.args) is not None and a.correlation.__class__ in _IDS and (ts := e.ts).__class__ in _NUMBERS
                 and (d := e.dur).__class__ in _NUMBERS and -inf < ts < inf and 0 <= d < inf]
        launches = [(e.pid, e.tid, a.correlation, ts)
                    for e in itertools.compress(events, map(launch.__contains__, categories))
                    if (a := e.args) is not None and a.correlation.__class__ in _IDS and (ts := e.ts).__class__ in _NUMBERS
                    and -inf < ts < inf]
        del categories
        item_pids, item_ids, starts, lengths, item_categories, item_names = zip(*items) if items else ((),) * 6
        launch_pids, launch_tids, launch_ids, times = zip(*launches) if launches else ((),) * 4
        item_pids, launch_pids = _hashables(item_pids), _hashables(launch_pids)
        scopes: dict = {}
        scope_of_pid = {pid: scopes.setdefault(scope_of(pid), len(scopes)) for pid in {*item_pids, *launch_pids}}
        tracks = list(zip(launch_pids, _hashables(launch_tids)))
        numbers = {track: number for number, track in enumerate(set(tracks))}
        starts = array("d", starts)
        names = name_ids = None
        if self.names:
            by_name = {name: number for number, name in enumerate(dict.fromkeys(_hashables(item_names)))}
            name_ids = array("I", map(by_name.__getitem__, _hashables(item_names)))
            names = [name if isinstance(name, str) else "?" for name in by_name]
        return DeviceColumns(
            list(scopes), list(numbers),
            array("I", map(scope_of_pid.__getitem__, launch_pids)), list(launch_ids),
            array("I", map(numbers.__getitem__, tracks)), array("d", times),
            array("I", map(scope_of_pid.__getitem__, item_pids)), list(item_ids),
            starts, array("d", map(operator.add, starts, lengths)), list(item_categories),
            names, name_ids, _first_time(events))


def _first_time(events: list) -> float | None:
    try:
        first = min(map(_TS, events), default=None)  # C-level; a timestamp that is not a number stops it
    except TypeError:
        first = min((t for t in map(_TS, events) if t.__class__ in _NUMBERS and math.isfinite(t)), default=None)
    return float(first) if first is not None and math.isfinite(first) else None


def _hashables(values: Sequence) -> Sequence:
    """The values themselves when all can key a dict (the usual case), else each made one."""
    try:
        set(values)
    except TypeError:
        return list(map(hashable, values))
    return values


SCAN = 64  # ranges up to this long are scanned; longer ones use _RangeTables


@dataclass(frozen=True, slots=True)
class _RangeTables:
    hull: RangeHull  # the extent of any range of items
    durations: list[float]  # durations[k]: the first k items' durations added up
    overlaps: list[int]  # overlaps[k]: how many of items 1..k overlap the item before them


@dataclass(slots=True)
class TrackLaunches:
    """One host track's launches that queued usable device work, in time order. Their items are
    numbered consecutively: launch k queued the items from bounds[k] to bounds[k + 1]."""

    times: list[float] = field(default_factory=list)
    bounds: list[int] = field(default_factory=list)  # one more than there are launches

    def between(self, start: float, end: float) -> range:
        """The items of the launches made from start to end, both included."""
        return range(self.bounds[bisect_left(self.times, start)], self.bounds[bisect_right(self.times, end)])


@dataclass(slots=True)
class DeviceWork:
    """The device items of a trace and the host launches that queued them. Items are numbered by
    track, then launch time, then start: the items a span's launches queued are one range."""

    tracks: dict[Track, TrackLaunches]
    starts: list[float]  # per item
    ends: list[float]
    scopes: dict[Hashable, tuple[list[float], list[float], list[int]]]  # rank scope -> sorted starts, running
    # maximum of ends, item numbers: the items of a rank in start order
    names: list[str] | None = None  # the distinct kernel names, when they were read
    name_ids: list[int] | None = None  # per item: its name's number in names
    categories: list[str] = field(default_factory=list)  # per item: the event's cat (kernel, gpu_memcpy, ...)
    problems: Counter = field(default_factory=Counter)
    tables: _RangeTables | None = None  # built on the first long range asked about
    budget: int | None = None  # items unions and splits may still walk (spend), once they have started

    @property
    def empty(self) -> bool:
        return not self.starts

    @classmethod
    def nothing(cls) -> DeviceWork:
        """No device work read (the device view not asked for)."""
        return cls({}, [], [], {})

    def launched(self, span: Span) -> range:
        """The items queued by the launches inside a host span, on its own track."""
        launches = self.tracks.get(span.track)
        return launches.between(span.start, span.end) if launches is not None else range(0)

    # Ranges are short in real traces (a step's own launches) and scanned; spans nested in each
    # other would each scan nearly every item, the square of the input, so long ranges are answered
    # from tables built once: sparse tables of starts and ends, prefix sums of durations and of
    # overlaps between neighbours.

    def extent(self, items: range) -> Interval | None:
        if not items:
            return None
        if len(items) <= SCAN:
            return min(self.starts[items.start:items.stop]), max(self.ends[items.start:items.stop])
        return self._tables().hull.hull(items.start, items.stop)

    def sequential(self, items: range) -> bool:
        """Each item starts after the one before it ends (one stream): then their busy time is their sum.
        Times are floats: an item may seem to start a few ulps before the one before it ends."""
        a, b = items.start, items.stop
        if b - a < 2:
            return True
        if b - a > SCAN:
            overlaps = self._tables().overlaps
            return overlaps[b - 1] - overlaps[a] == 0
        overlap = max(map(operator.sub, self.ends[a:b - 1], self.starts[a + 1:b]))
        return overlap <= slack(self.ends[b - 1])

    def busy(self, items: range) -> float | None:
        """The time at least one of the items runs: overlapping streams count once. None when the
        union is past what a trace may spend (see BUDGET), counted in problems."""
        a, b = items.start, items.stop
        if self.sequential(items):
            return self.duration(items)
        if not self.spend(b - a):
            self.problems[UNION_SKIPPED] += 1
            return None
        return union_length(zip(self.starts[a:b], self.ends[a:b]))

    def spend(self, items: int) -> bool:
        """May a union or an iteration's split walk this many more items (see BUDGET)? If so, spent."""
        if self.budget is None:
            self.budget = BUDGET * len(self.starts) + ALLOWANCE
        if items > self.budget:
            return False
        self.budget -= items
        return True

    def duration(self, items: range) -> float:
        """The items' durations added up (each a difference of nearby times: exact, unlike two large sums)."""
        if len(items) > SCAN:
            sums = self._tables().durations
            return sums[items.stop] - sums[items.start]
        return math.fsum(map(operator.sub, self.ends[items.start:items.stop], self.starts[items.start:items.stop]))

    def _tables(self) -> _RangeTables:
        if self.tables is None:
            starts, ends = self.starts, self.ends
            lengths = list(map(operator.sub, ends, starts))
            # Item k overlaps item k - 1 (starts before its end, by more than float noise: slack()):
            # counted up to each k. In maps, not a loop: this runs over every launch of the trace.
            noise = map(operator.mul, map(math.ulp, ends), itertools.repeat(4.0))
            overlapping = [False, *map(operator.lt, starts[1:], map(operator.sub, ends, noise))]
            self.tables = _RangeTables(RangeHull(starts, ends),
                                       list(itertools.accumulate(lengths, initial=0.0)),
                                       list(itertools.accumulate(overlapping)))
        return self.tables

    def alone(self, scope: Hashable, start: float, end: float, own: int) -> bool:
        """Do the `own` items of a rank that start from start to end run alone there: nothing else of
        the rank starts then, and nothing that started earlier still runs?"""
        found = self.scopes.get(scope)
        if found is None:
            return own == 0
        starts, reach, _ = found
        lo, hi = bisect_left(starts, start), bisect_left(starts, end)
        return hi - lo == own and not (lo and reach[lo - 1] > start + slack(start))

    def starting(self, scope: Hashable, start: float, end: float) -> tuple[list[int], float | None]:
        """The items of a rank that start from start to end, and how far the rank's earlier items still
        run past start (None: none does). An earlier item is known by that alone: a rank whose long
        kernel runs through thousands of iterations would have every one of them walk every item since."""
        found = self.scopes.get(scope)
        if found is None:
            return [], None
        starts, reach, ids = found
        lo, hi = bisect_left(starts, start), bisect_left(starts, end)
        earlier = reach[lo - 1] if lo and reach[lo - 1] > start + slack(start) else None
        return ids[lo:hi], earlier

    def warnings(self) -> list[str]:
        return [f"{count} {why}" for why, count in sorted(self.problems.items())]

    @classmethod
    def joined(cls, stretches: Iterable[DeviceColumns]) -> DeviceWork:
        """Join every stretch's launches and device work within each rank; see the module's docstring.
        Hundreds of thousands of launches and items: sorted and matched as numpy arrays."""
        import numpy as np  # here: a trace whose GPU annotations give its device time never needs it

        stretches = list(stretches)
        names = bool(stretches) and all(stretch.names is not None for stretch in stretches)
        tracks: dict[Track, int] = {}
        scopes: dict[Hashable, int] = {}
        launch_scopes, launch_tracks, launch_ids, launch_times = [], [], [], []
        item_scopes, item_ids, starts, ends, categories, name_ids = [], [], [], [], [], []
        numbered: dict[str, int] = {}  # every stretch's names, numbered once
        for stretch in stretches:
            # Each stretch numbers its scopes, tracks and names itself: renumbered for the whole trace.
            scope_numbers = np.array([scopes.setdefault(scope, len(scopes)) for scope in stretch.scopes] or [0])
            track_numbers = np.array([tracks.setdefault(track, len(tracks)) for track in stretch.tracks] or [0])
            launch_scopes.append(scope_numbers[_column(np, stretch.launch_scopes)])
            launch_tracks.append(track_numbers[_column(np, stretch.launch_tracks)])
            launch_ids += stretch.launch_ids
            launch_times.append(_column(np, stretch.launch_times))
            item_scopes.append(scope_numbers[_column(np, stretch.item_scopes)])
            item_ids += stretch.item_ids
            starts.append(_column(np, stretch.starts))
            ends.append(_column(np, stretch.ends))
            categories += stretch.categories
            if names:
                renumber = np.array([numbered.setdefault(name, len(numbered)) for name in stretch.names] or [0])
                name_ids.append(renumber[_column(np, stretch.name_ids)])
        launch_times_, starts_, ends_ = (np.concatenate(c) if c else np.zeros(0) for c in (launch_times, starts, ends))
        launch_tracks_ = np.concatenate(launch_tracks) if launch_tracks else np.zeros(0, np.int64)
        problems: Counter = Counter()
        owners = _owners(np, np.concatenate(launch_scopes) if launch_scopes else np.zeros(0, np.int64),
                         launch_ids, np.concatenate(item_scopes) if item_scopes else np.zeros(0, np.int64),
                         item_ids, problems)
        items = np.flatnonzero(owners >= 0)
        # Launches by track, then time; items by launch, then start (ties: in the order they were read).
        launched = np.zeros(len(launch_ids), bool)
        launched[owners[items]] = True
        launched = np.flatnonzero(launched)
        launched = launched[np.lexsort((launched, launch_times_[launched], launch_tracks_[launched]))]
        position = np.zeros(len(launch_ids), np.int64)
        position[launched] = np.arange(len(launched))
        rank = position[owners[items]]
        order = np.lexsort((items, starts_[items], rank))
        items, rank = items[order], rank[order]
        firsts = _firsts(np, rank)
        group_launches = launched[rank[firsts]]
        group_times = launch_times_[group_launches]
        # Device work cannot start before its launch: such a launch's items are dropped.
        early = starts_[items[firsts]] < group_times - 4 * np.spacing(np.abs(group_times))  # slack()
        if early.any():
            problems[BEFORE_LAUNCH] = int(early.sum())
            keep = ~early[np.searchsorted(firsts, np.arange(len(items)), side="right") - 1]
            items, rank = items[keep], rank[keep]
            firsts = _firsts(np, rank)
            group_launches = launched[rank[firsts]]
            group_times = launch_times_[group_launches]
        order_list = items.tolist()
        item_starts, item_ends = starts_[items], ends_[items]
        work = cls({}, item_starts.tolist(), item_ends.tolist(), {},
                   names=list(numbered) if names else None,
                   name_ids=np.concatenate(name_ids)[items].tolist() if names else None,
                   categories=list(map(categories.__getitem__, order_list)), problems=problems)
        # Launches are grouped by track already: each track's are one stretch of the groups.
        bounds = [*firsts.tolist(), len(items)]
        group_tracks = launch_tracks_[group_launches]
        times = group_times.tolist()
        track_names = list(tracks)
        edges = [0, *(_firsts(np, group_tracks)[1:].tolist()), len(group_tracks)] if len(group_tracks) else [0]
        for a, b in itertools.pairwise(edges):
            work.tracks[track_names[group_tracks[a]]] = TrackLaunches(times[a:b], bounds[a:b + 1])
        # Each rank's items in start order, with the running maximum of their ends.
        scoped: dict[Hashable, list[range]] = defaultdict(list)
        for track, on_track in work.tracks.items():
            scoped[scope_of(track[0])].append(range(on_track.bounds[0], on_track.bounds[-1]))
        for scope, ranges in scoped.items():
            ids = np.concatenate([np.arange(r.start, r.stop) for r in ranges])
            ids = ids[np.argsort(item_starts[ids], kind="stable")]
            work.scopes[scope] = (item_starts[ids].tolist(), np.maximum.accumulate(item_ends[ids]).tolist(),
                                  ids.tolist())
        return work


def _column(np, values: Sequence) -> Any:
    """An array column as numpy, without a copy (another sequence is copied)."""
    if isinstance(values, array):
        return np.frombuffer(values, dtype=np.float64 if values.typecode == "d" else np.uint32) if values \
            else np.zeros(0, np.float64 if values.typecode == "d" else np.int64)
    return np.asarray(values)


def _firsts(np, values) -> Any:
    """Where each run of equal values begins."""
    if not len(values):
        return np.zeros(0, np.int64)
    return np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))


def _numbered(np, values) -> Any:
    """values as the numbers 0, 1, ...: equal where the values are equal (numpy's unique, but by sorting)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    numbers = np.empty(len(values), np.int64)
    numbers[order] = np.cumsum(np.concatenate(([False], ordered[1:] != ordered[:-1])))
    return numbers


def _owners(np, launch_scopes, launch_ids: list, item_scopes, item_ids: list, problems: Counter) -> Any:
    """Per item, the number of the launch of its rank that carries its correlation id; -1 when none
    does, or when several do (counted in problems: their device work is not used)."""
    owners = np.full(len(item_ids), -1, np.int64)
    if not launch_ids:
        return owners
    ids = launch_ids + item_ids
    if set(map(type, ids)) == {int} and -(2**63) <= min(ids) and max(ids) < 2**63:
        codes = _numbered(np, np.array(ids, np.int64))
    else:  # ids that are strings (or wider than 64 bits): numbered as Python values, equal where equal
        numbers: dict = {}
        codes = np.array([numbers.setdefault(i, len(numbers)) for i in ids], np.int64)
    width = int(codes.max()) + 1
    keys = launch_scopes.astype(np.int64) * width + codes[:len(launch_ids)]
    wanted = item_scopes.astype(np.int64) * width + codes[len(launch_ids):]
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    repeated = sorted_keys[1:] == sorted_keys[:-1]
    if repeated.any():  # rare: the ids more than one launch carries
        shared = np.zeros(len(sorted_keys), bool)
        shared[1:] |= repeated
        shared[:-1] |= repeated
        problems[SHARED_CORRELATION] = int(np.count_nonzero(repeated & ~np.concatenate(([False], repeated[:-1]))))
        order, sorted_keys = order[~shared], sorted_keys[~shared]
    at = np.minimum(np.searchsorted(sorted_keys, wanted), max(len(sorted_keys) - 1, 0))
    if len(sorted_keys):
        found = sorted_keys[at] == wanted
        owners[found] = order[at[found]]
    return owners


GPU_ANNOTATION_TEXT = b'"gpu_user_annotation"'


def lacks_gpu_annotations(document) -> bool:
    """A document without a single GPU annotation (SGLang's own captures): its device view will be
    needed, so its launches and kernels are best reduced in the one decoding pass. A document with
    some is judged after reading (needs_kernels), at the cost of a second pass only when needed."""
    find = getattr(document, "find", None)
    return find is None or find(GPU_ANNOTATION_TEXT) < 0


def needs_kernels(trace, index) -> bool:
    """Does device time here need the kernels (else GPU annotations give it)? When a step span or a
    `draft`/`draft_extend` stage span has no GPU annotation copy (Kineto writes none around replayed
    CUDA graphs; SGLang's own captures have none at all), or draft work runs outside both (a worker's
    draft function in the python stacks)."""
    from ..index import GPU_CATEGORY, STAGE_SPANS
    if any(not step.gpu_events for step in index.steps):
        return True
    stages = sum(1 for spans in index.spans.values() for span in spans if span.kind == "stage")
    copies = sum(1 for _, event in trace.events.selected()
                 if event.cat == GPU_CATEGORY and event.name in STAGE_SPANS)
    if copies < stages:
        return True
    from .iterations import is_draft_frame
    return any(span.kind == "frame" and is_draft_frame(span.name) and index.nearest(span, "stage") is None
               for spans in index.spans.values() for span in spans)


def device_work(trace, names: bool = False) -> DeviceWork:
    """The trace's device work: from what its read reduced, or else by reading every event now."""
    if trace.reduced is not None and (not names or all(c.name_ids is not None for c in trace.reduced)):
        return DeviceWork.joined(trace.reduced)
    reducer = DeviceReducer(names)
    return DeviceWork.joined(trace.events.map(reducer.item, functools.partial(_reduce_list, reducer)))


def _reduce_list(reducer: DeviceReducer, events: Iterable) -> DeviceColumns:
    return reducer(events if isinstance(events, list) else list(events))


def slack(time: float) -> float:
    """How far apart two float times may be and still be one time: a few ulps (epoch-based microsecond
    times hold about a nanosecond, so do their sums)."""
    return 4 * math.ulp(time)


def union_length(intervals: Iterable[Interval]) -> float:
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


__all__ = ["BEFORE_LAUNCH", "DEVICE_CATEGORIES", "SHARED_CORRELATION", "DeviceColumns", "DeviceReducer",
           "DeviceWork", "TrackLaunches", "device_work", "union_length"]
