"""Device work: every launch joined to the kernels and memory copies it queued, and what a host span
(a step, a stage span, an iteration) launched.

A launch on a host thread (`cuda_runtime`, `cuda_driver`) and the device work it queued share
`args.correlation`; a `cudaGraphLaunch` queues a whole graph's kernels under one id. Those ids are
unique within one rank only: a merged trace repeats them in every rank, so launches and device work
are joined within the rank's scope (ranks.scope_of). A pair is used only when it is physically
possible: one launch for the id, and no device work starting before it. What breaks either rule is
counted and reported, never measured.

Reading every launch and kernel of a large trace is most of what stats costs, so it happens while
the trace is read: columns.DeviceReducer turns each chunk of decoded events into numpy columns
where the chunk was read (on every core), and `DeviceWork.joined` joins the chunks' columns. Device
work is held as numbered items in numpy arrays, times in integer nanoseconds from the trace's start
(clock.py); the items a launch queued are numbered consecutively, so that a span's work is a few
ranges of numbers, and the extents, durations and busy times of thousands of ranges are answered
at once (ranges.py).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..attribution.index import Span, Track
from ..attribution.ranks import scope_of
from .columns import DEVICE_CATEGORIES, LAUNCH_SUFFIXES, DeviceColumns, DeviceReducer
from .ranges import Ranges

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
# busy time, the iteration no device clock, and a warning counts them. Each stage that walks (the step
# rows, the iteration rows, a plain capture's iterations) has an Allowance of its own, decided from the
# trace's item count before any runs: no stage's figures depend on what another spent, or whether it ran.
BUDGET, ALLOWANCE = 8, 2**16


@dataclass(slots=True)
class Allowance:
    """The items one stage's unions or splits may still walk (see BUDGET): made per stage, per measure."""

    left: int
    skipped: int = 0  # unions or splits refused

    @classmethod
    def of(cls, work: DeviceWork) -> Allowance:
        return cls(BUDGET * len(work.ranges) + ALLOWANCE)

    def spend(self, items: int) -> bool:
        """May this many more items be walked? If so, spent; if not, counted in skipped."""
        if items > self.left:
            self.skipped += 1
            return False
        self.left -= items
        return True


@dataclass(slots=True)
class TrackLaunches:
    """One host track's launches that queued usable device work, in time order (nanoseconds from
    the trace's start). Their items are numbered consecutively: launch k queued the items from
    bounds[k] to bounds[k + 1]."""

    times: Any  # numpy int64
    bounds: Any  # numpy int64, one more than there are launches

    def between(self, start: int, end: int) -> range:
        """The items of the launches made from start to end (nanoseconds), both included."""
        lo = int(self.times.searchsorted(start, "left"))
        hi = int(self.times.searchsorted(end, "right"))
        return range(int(self.bounds[lo]), int(self.bounds[hi]))

    def between_many(self, starts, ends) -> tuple[Any, Any]:
        """between() for many windows at once: the first and end item numbers of each."""
        return (self.bounds[self.times.searchsorted(starts, "left")],
                self.bounds[self.times.searchsorted(ends, "right")])


@dataclass(slots=True)
class DeviceWork:
    """The device items of a trace and the host launches that queued them. Items are numbered by
    track, then launch time, then start: the items a span's launches queued are one range."""

    tracks: dict[Track, TrackLaunches]
    ranges: Ranges  # per item: start and end in nanoseconds from the trace's start, and what ranges of them hold
    _scopes: dict[Hashable, tuple[Any, Any, Any]] | None  # see scopes; None until asked for
    names: list[str] | None = None  # the distinct kernel names, when they were read
    name_ids: Any = None  # numpy, per item: its name's number in names
    categories: Any = None  # numpy int8, per item: its category's number in columns.DEVICE_CATEGORIES
    problems: Counter = field(default_factory=Counter)  # what the join could not use, counted once when joined

    @property
    def empty(self) -> bool:
        return not len(self.ranges)

    @property
    def starts(self) -> Any:
        return self.ranges.starts

    @property
    def ends(self) -> Any:
        return self.ranges.ends

    @classmethod
    def nothing(cls) -> DeviceWork:
        """No device work read (the device view not asked for)."""
        return cls({}, Ranges.empty(), None)

    def launched(self, span: Span) -> range:
        """The items queued by the launches inside a host span, on its own track."""
        launches = self.tracks.get(span.track)
        return launches.between(span.start_ns, span.end_ns) if launches is not None else range(0)

    def extent(self, items: range) -> tuple[int, int] | None:
        return self.ranges.extent(items.start, items.stop)

    def sequential(self, items: range) -> bool:
        """Each item starts once the one before it has ended (one stream): then their busy time is their sum."""
        return self.ranges.sequential(items.start, items.stop)

    def duration(self, items: range) -> int:
        """The items' durations added up, in nanoseconds."""
        return self.ranges.duration(items.start, items.stop)

    def busy(self, items: range, allowance: Allowance) -> int | None:
        """The time at least one of the items runs, in nanoseconds: overlapping streams count once.
        None when the union is past what the allowance lets the stage walk (see BUDGET)."""
        a, b = items.start, items.stop
        if self.sequential(items):
            return self.duration(items)
        if not allowance.spend(b - a):
            return None
        return self.ranges.union(a, b)

    def alone(self, scope: Hashable, start: int, end: int, own: int) -> bool:
        """Do the `own` items of a rank that start from start to end run alone there: nothing else of
        the rank starts then, and nothing that started earlier still runs?"""
        found = self.scopes.get(scope)
        if found is None:
            return own == 0
        starts, reach, _ = found
        lo, hi = int(starts.searchsorted(start, "left")), int(starts.searchsorted(end, "left"))
        return hi - lo == own and not (lo and int(reach[lo - 1]) > start)

    def starting(self, scope: Hashable, start: int, end: int) -> tuple[Any, int | None]:
        """The items of a rank that start from start to end, and how far the rank's earlier items still
        run past start (None: none does). An earlier item is known by that alone: a rank whose long
        kernel runs through thousands of iterations would have every one of them walk every item since."""
        found = self.scopes.get(scope)
        if found is None:
            return [], None
        starts, reach, ids = found
        lo, hi = int(starts.searchsorted(start, "left")), int(starts.searchsorted(end, "left"))
        earlier = int(reach[lo - 1]) if lo and int(reach[lo - 1]) > start else None
        return ids[lo:hi], earlier

    def warnings(self, skipped: Counter | None = None) -> list[str]:
        """What the join could not use, one line each; skipped: what a measure's stages left out
        besides (UNION_SKIPPED, SPLIT_SKIPPED: counts), in the same order."""
        return [f"{count} {why}" for why, count in sorted((self.problems + (skipped or Counter())).items())]

    @classmethod
    def joined(cls, stretches: Iterable[DeviceColumns], origin_ns: int = 0, consume: bool = False) -> DeviceWork:
        """Join every chunk's launches and device work within each rank; see the module's docstring.
        origin_ns: the trace's start, from which the work's times are counted. consume: let go of each
        chunk's columns once joined (a kernel-dense trace's memory is mostly these columns)."""
        import numpy as np  # here: a trace whose GPU annotations give its device time never needs it

        problems: Counter = Counter()
        stretches = [_near(np, stretch, origin_ns, problems) for stretch in stretches]
        names = bool(stretches) and all(stretch.names is not None for stretch in stretches)
        tracks: dict[Track, int] = {}
        numbered: dict[str, int] = {}  # every chunk's names, numbered once
        (launch_scopes, launch_tracks, launch_times, launch_ids, item_scopes, item_ids, starts, ends, categories,
         name_ids) = _gathered(np, stretches, tracks, numbered if names else None, problems, consume)

        def joined_column(columns: list, dtype) -> Any:
            found = np.concatenate(columns) if columns else np.zeros(0, dtype)
            columns.clear()
            return found

        launch_times_ = joined_column(launch_times, np.int64)
        starts_, ends_ = joined_column(starts, np.int64), joined_column(ends, np.int64)
        for column in (launch_times_, starts_, ends_):
            if len(column):  # then _near kept only times within 64 bits of the start, which is within them too
                column -= origin_ns
        launch_tracks_ = joined_column(launch_tracks, np.int64)
        owners = _owners(np, joined_column(launch_scopes, np.int64), launch_ids, joined_column(item_scopes, np.int64),
                         item_ids, problems)
        items = np.flatnonzero(owners >= 0)
        # Launches by track, then time; items by launch, then start (ties: in the order they were read).
        count = len(launch_times_)
        launched = np.zeros(count, bool)
        launched[owners[items]] = True
        launched = np.flatnonzero(launched)
        launched = launched[np.lexsort((launched, launch_times_[launched], launch_tracks_[launched]))]
        position = np.zeros(count, np.int64)
        position[launched] = np.arange(len(launched))
        rank = position[owners[items]]
        order = np.lexsort((items, starts_[items], rank))
        items, rank = items[order], rank[order]
        firsts = _firsts(np, rank)
        group_launches = launched[rank[firsts]]
        group_times = launch_times_[group_launches]
        # Device work cannot start before its launch: such a launch's items are dropped.
        early = starts_[items[firsts]] < group_times
        if early.any():
            problems[BEFORE_LAUNCH] = int(early.sum())
            keep = ~early[np.searchsorted(firsts, np.arange(len(items)), side="right") - 1]
            items, rank = items[keep], rank[keep]
            firsts = _firsts(np, rank)
            group_launches = launched[rank[firsts]]
            group_times = launch_times_[group_launches]
        item_starts, item_ends = starts_[items], ends_[items]
        del starts_, ends_, owners, order
        work = cls({}, Ranges(np, item_starts, item_ends), None,
                   names=list(numbered) if names else None,
                   name_ids=np.concatenate(name_ids)[items] if names and name_ids else None,
                   categories=joined_column(categories, np.int8)[items], problems=problems)
        # Launches are grouped by track already: each track's are one stretch of the groups.
        bounds = np.append(firsts, len(items)).astype(np.int64)
        group_tracks = launch_tracks_[group_launches]
        track_names = list(tracks)
        edges = [0, *(_firsts(np, group_tracks)[1:].tolist()), len(group_tracks)] if len(group_tracks) else [0]
        for a, b in itertools.pairwise(edges):
            work.tracks[track_names[int(group_tracks[a])]] = TrackLaunches(group_times[a:b], bounds[a:b + 1])
        return work

    @property
    def scopes(self) -> dict[Hashable, tuple[Any, Any, Any]]:
        """Each rank scope's items in start order: their starts, the running maximum of their ends,
        and their numbers (numpy). Built on first use: only decode iterations ask."""
        if self._scopes is None:
            import numpy as np
            scoped: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
            for track, on_track in self.tracks.items():
                scoped[scope_of(track[0])].append((int(on_track.bounds[0]), int(on_track.bounds[-1])))
            self._scopes = {}
            for scope, spans in scoped.items():
                ids = np.concatenate([np.arange(a, b) for a, b in spans])
                ids = ids[np.argsort(self.starts[ids], kind="stable")]
                self._scopes[scope] = (self.starts[ids], np.maximum.accumulate(self.ends[ids]), ids)
        return self._scopes


FAR = ("device events and launches too far from the trace's start (more than 2**63 ns apart, as an event "
       "at an absurd time makes them): not used")
_FAR_NS = 9_000_000_000_000_000_000


def _gathered(np: Any, stretches: list[DeviceColumns], tracks: dict[Track, int], numbered: dict[str, int] | None,
              problems: Counter, consume: bool) -> tuple[list, ...]:
    """Every chunk's columns, as lists of arrays to join: each chunk numbers its scopes, tracks and names
    itself, renumbered here for the whole trace (tracks and numbered filled; numbered None: no names)."""
    scopes: dict[Hashable, int] = {}
    launch_scopes, launch_tracks, launch_times, launch_ids = [], [], [], []
    item_scopes, item_ids, starts, ends, categories, name_ids = [], [], [], [], [], []
    for stretch in stretches:
        problems.update(stretch.refused)
        scope_numbers = np.array([scopes.setdefault(scope, len(scopes)) for scope in stretch.scopes] or [0])
        track_numbers = np.array([tracks.setdefault(track, len(tracks)) for track in stretch.tracks] or [0])
        launch_scopes.append(scope_numbers[stretch.launch_scopes])
        launch_tracks.append(track_numbers[stretch.launch_tracks])
        launch_ids.append(stretch.launch_ids)
        launch_times.append(stretch.launch_ns)
        item_scopes.append(scope_numbers[stretch.item_scopes])
        item_ids.append(stretch.item_ids)
        starts.append(stretch.starts)
        ends.append(stretch.ends)
        categories.append(stretch.categories)
        if numbered is not None:
            renumber = np.array([numbered.setdefault(name, len(numbered)) for name in stretch.names] or [0])
            name_ids.append(renumber[stretch.name_ids])
        if consume:
            stretch.launch_scopes = stretch.launch_tracks = stretch.item_scopes = stretch.name_ids = None
            stretch.launch_ids = stretch.item_ids = stretch.launch_ns = stretch.starts = stretch.ends = None
            stretch.categories = None
    return (launch_scopes, launch_tracks, launch_times, launch_ids, item_scopes, item_ids, starts, ends, categories,
            name_ids)


def _near(np, stretch: DeviceColumns, origin: int, problems: Counter) -> DeviceColumns:
    """The chunk's launches and items whose times, counted from the trace's start, are 64-bit
    nanoseconds; the others (a hostile trace's event at an absurd time can put its start beyond
    any of them) are left out and counted."""
    def near(column) -> Any:
        if not len(column):
            return np.ones(0, bool)
        if -_FAR_NS < int(column.min()) - origin and int(column.max()) - origin < _FAR_NS:
            return None  # all of them: the usual case
        if not -_FAR_NS < origin < _FAR_NS:
            return np.zeros(len(column), bool)
        return np.abs(column.astype(np.float64) - float(origin)) < float(_FAR_NS)

    launches = near(stretch.launch_ns)
    starts, ends = near(stretch.starts), near(stretch.ends)
    items = None if starts is None and ends is None else (
        (np.ones(len(stretch.starts), bool) if starts is None else starts)
        & (np.ones(len(stretch.starts), bool) if ends is None else ends))
    if launches is None and items is None:
        return stretch
    far = 0
    if launches is not None:
        keep = np.flatnonzero(launches)
        far += len(stretch.launch_ns) - len(keep)
        stretch.launch_scopes, stretch.launch_tracks = stretch.launch_scopes[keep], stretch.launch_tracks[keep]
        stretch.launch_ns, stretch.launch_ids = stretch.launch_ns[keep], _picked(np, stretch.launch_ids, keep)
    if items is not None:
        keep = np.flatnonzero(items)
        far += len(stretch.starts) - len(keep)
        stretch.item_scopes, stretch.starts, stretch.ends = stretch.item_scopes[keep], stretch.starts[keep], stretch.ends[keep]
        stretch.categories, stretch.item_ids = stretch.categories[keep], _picked(np, stretch.item_ids, keep)
        if stretch.name_ids is not None:
            stretch.name_ids = stretch.name_ids[keep]
    if far:
        problems[FAR] += far
    return stretch


def _picked(np, ids, keep) -> Any:
    return [ids[k] for k in keep.tolist()] if isinstance(ids, list) else ids[keep]


def _firsts(np, values) -> Any:
    """Where each run of equal values begins."""
    if not len(values):
        return np.zeros(0, np.int64)
    return np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))


def _numbered(np, values) -> Any:
    """values as the numbers 0, 1, ...: equal where the values are equal (numpy's unique, but by sorting)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    changed = np.concatenate(([False], ordered[1:] != ordered[:-1]))
    # The running count into the sorted copy's own buffer (its values are not needed again): a column
    # of a million ids less at the device join's peak.
    counted = np.cumsum(changed, out=ordered.view(np.int64)) if ordered.dtype == np.int64 else np.cumsum(changed)
    del changed
    numbers = np.empty(len(values), np.int64)
    numbers[order] = counted
    return numbers


def _codes(np, columns: list) -> Any:
    """Every chunk's correlation ids as numbers, equal where the ids are equal: int64 ids as they
    are sorted; where some are strings or wider than 64 bits, numbered as Python values."""
    if all(not isinstance(column, list) for column in columns):
        joined = np.concatenate(columns) if columns else np.zeros(0, np.int64)
        return _numbered(np, joined) if len(joined) else joined
    numbers: dict = {}
    values = itertools.chain.from_iterable(column.tolist() if not isinstance(column, list) else column
                                           for column in columns)
    return np.fromiter((numbers.setdefault(value, len(numbers)) for value in values), np.int64)


def _owners(np, launch_scopes, launch_ids: list, item_scopes, item_ids: list, problems: Counter) -> Any:
    """Per item, the number of the launch of its rank that carries its correlation id; -1 when none
    does, or when several do (counted in problems: their device work is not used)."""
    items = len(item_scopes)
    owners = np.full(items, -1, np.int64)
    launches = len(launch_scopes)
    if not launches:
        return owners
    codes = _codes(np, [*launch_ids, *item_ids])
    width = int(codes.max()) + 1
    keys = launch_scopes.astype(np.int64) * width + codes[:launches]
    wanted = item_scopes.astype(np.int64)  # scope * width + code, in one column (the items are most of them)
    wanted *= width
    wanted += codes[launches:]
    del codes
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


def device_work(trace, names: bool = False) -> DeviceWork:
    """The trace's device work: from what its read reduced, or else by reading every event now."""
    origin = trace.origin_ns or 0
    if trace.reduced is not None and (not names or all(c.name_ids is not None for c in trace.reduced)):
        reduced, trace.reduced = trace.reduced, None  # joined once: the chunks' columns are let go
        return DeviceWork.joined(reduced, origin, consume=True)
    return DeviceWork.joined(trace.events.reduce(DeviceReducer(names)), origin, consume=True)


def device_reducer(device: bool | None = True, *, kernel_names: bool = False) -> DeviceReducer | None:
    """What reads a trace's launches and kernels while the trace is read for attribution
    (attribution.analyse.read's reduce): with device, or None (the device view only where device
    time needs it, see measure.measure), or kernel_names, in the same pass: whether the device view
    is needed is known only once the trace is read, and reading it again would cost more than
    keeping its columns does. None when neither is wanted."""
    return DeviceReducer(kernel_names) if device or kernel_names or device is None else None


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


__all__ = ["BEFORE_LAUNCH", "DEVICE_CATEGORIES", "LAUNCH_SUFFIXES", "SHARED_CORRELATION", "DeviceColumns",
           "DeviceReducer", "DeviceWork", "TrackLaunches", "device_work", "union_length"]

